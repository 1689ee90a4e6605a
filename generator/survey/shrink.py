"""A model type's config class, shrunk to a tiny config: every size small, none two of them equal where a
layout could confuse them, as the family recipes (families/*.yaml ``tiny:``) choose theirs.

No recipe exists for a model type the survey meets for the first time, so the sizes are set by the config's
own field names (``hidden_size``, ``n_embd``, ``d_model``, ...), on the config and every sub-config it
holds (a vision tower's, an audio tower's), and the config class derives the rest (``layer_types`` from
``num_hidden_layers``, a head dim from the hidden size). A field this table does not know keeps the class's
default: the survey says what breaks, it does not guess a fix per model type.
"""

from __future__ import annotations

from typing import Any

#: batch, prompt length and the sizes the survey sets. Batch 1 and seq 6, kv heads 2, heads 4, head dim 16,
#: hidden 64, MLP 88, experts 5 of which 2 per token, vocabulary 384: a [1, 6, 64] residual cannot be mistaken
#: for a [1, 4, 6, 16] head tensor or an [x, 88] neuron row. Four layers (no tensor has a layer dimension):
#: a hybrid whose every fourth block attends (Qwen3-Next, Qwen3.5) keeps one attention block.
BATCH, SEQ = 1, 6
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, MLP, VOCAB = 64, 4, 2, 16, 4, 88, 384
EXPERTS, TOP_K, EXPERT_MLP = 5, 2, 24

SIZES: dict[str, int] = {
    # the residual width, by every name a config spells it
    "hidden_size": HIDDEN, "n_embd": HIDDEN, "d_model": HIDDEN, "dim": HIDDEN, "embed_dim": HIDDEN,
    "hidden_dim": HIDDEN, "n_embed": HIDDEN, "model_dim": HIDDEN,
    # depth
    "num_hidden_layers": LAYERS, "n_layer": LAYERS, "n_layers": LAYERS, "num_layers": LAYERS, "depth": 2,
    "decoder_layers": LAYERS, "encoder_layers": 2, "num_decoder_layers": LAYERS,
    # heads
    "num_attention_heads": HEADS, "n_head": HEADS, "n_heads": HEADS, "num_heads": HEADS,
    "decoder_attention_heads": HEADS, "encoder_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS, "n_kv_heads": KV_HEADS, "num_kv_heads": KV_HEADS,
    "multi_query_group_num": KV_HEADS,
    "head_dim": HEAD_DIM, "kv_channels": HEAD_DIM, "attention_head_dim": HEAD_DIM,
    # the MLP
    "intermediate_size": MLP, "n_inner": MLP, "ffn_dim": MLP, "ffn_hidden_size": MLP, "decoder_ffn_dim": MLP,
    "encoder_ffn_dim": MLP, "d_ff": MLP, "ffn_config_hidden": MLP,
    # mixtures
    "num_experts": EXPERTS, "num_local_experts": EXPERTS, "n_routed_experts": EXPERTS, "moe_num_experts": EXPERTS,
    "num_experts_per_tok": TOP_K, "moe_k": TOP_K, "moe_topk": TOP_K, "top_k": TOP_K,
    "moe_intermediate_size": EXPERT_MLP, "expert_intermediate_size": EXPERT_MLP,
    "shared_expert_intermediate_size": EXPERT_MLP + 8, "n_group": 1, "topk_group": 1,
    # multi-head latent attention
    "kv_lora_rank": 24, "q_lora_rank": 40, "qk_rope_head_dim": HEAD_DIM, "qk_nope_head_dim": HEAD_DIM,
    "v_head_dim": HEAD_DIM,
    # linear attention and state-space mixers
    "linear_num_value_heads": HEADS, "linear_num_key_heads": KV_HEADS, "linear_key_head_dim": 8,
    "linear_value_head_dim": 12, "state_size": 8, "mamba_d_state": 8, "mamba_n_heads": HEADS,
    "mamba_d_head": HEAD_DIM, "ssm_state_size": 8, "time_step_rank": 8, "mamba_n_groups": 1,
    # vocabulary and positions
    "vocab_size": VOCAB, "max_position_embeddings": 64, "n_positions": 64, "n_ctx": 64,
    "max_sequence_length": 64, "seq_length": 64,
    # a rotary embedding on part of each head (GPT-J, CodeGen): half of it
    "rotary_dim": HEAD_DIM // 2,
    # vision towers (never run: the survey feeds text only), kept small so building them costs nothing
    "image_size": 28, "patch_size": 14, "num_channels": 3, "vision_hidden_size": 32, "projection_dim": 32,
    "out_hidden_size": HIDDEN, "mm_hidden_size": 32, "num_image_tokens": 4, "mm_tokens_per_image": 4,
}

#: a head's width by every name a config spells it. A config may default it to None, meaning hidden / heads, while
#: its attention reads ``getattr(config, "head_dim", hidden // heads)``, which finds the None (Ministral's and
#: HunYuan's: ``None ** -0.5`` fails the build): the shrunk config states it, the same width hidden / heads gives
HEAD_DIMS = ("head_dim", "kv_channels", "attention_head_dim")
assert HIDDEN // HEADS == HEAD_DIM

#: fields whose default is a per-layer list or pattern sized for the full model: dropped, so the config
#: class derives them from the shrunk depth (a field it cannot derive keeps the default and may fail)
PER_LAYER = ("layer_types", "layers_block_type", "block_types", "mlp_only_layers", "full_attn_idxs")


def shrunk_kwargs(config_class: type, depth: int = 0) -> dict[str, Any]:
    """The keyword arguments that build ``config_class`` tiny: the sizes it has fields for, and each
    sub-config's own shrunk arguments."""
    from transformers import PretrainedConfig

    default = config_class()
    fields = default.to_dict()
    aliases = getattr(config_class, "attribute_map", {}) or {}
    kwargs: dict[str, Any] = {}
    for name, value in fields.items():
        attr = getattr(default, name, None)
        if isinstance(attr, PretrainedConfig) and depth < 3:
            kwargs[name] = {**shrunk_kwargs(type(attr), depth + 1), "model_type": attr.model_type}
        elif name in SIZES and isinstance(value, int) and not isinstance(value, bool):
            kwargs[name] = SIZES[name]
    for standard, native in aliases.items():
        if standard in SIZES and native in fields and native not in kwargs and isinstance(fields[native], int):
            kwargs[native] = SIZES[standard]
    for name in HEAD_DIMS:  # a head dim defaulting to None (Ministral, HunYuan): what hidden / heads derives
        if name in fields and fields[name] is None and kwargs.get("hidden_size") == HIDDEN and \
                kwargs.get("num_attention_heads") == HEADS:
            kwargs[name] = HEAD_DIM
    if "head_dim" in kwargs and "hidden_size" not in kwargs and not any(a in kwargs for a in aliases.values()):
        kwargs.pop("head_dim")  # a tower with a head dim but no residual field of ours: keep its own pair
    for name in PER_LAYER:
        if isinstance(fields.get(name), list) and name not in kwargs:
            kwargs[name] = None
    _consistent(fields, kwargs, config_class)
    return kwargs


def _consistent(fields: dict[str, Any], kwargs: dict[str, Any], config_class: type) -> None:
    """The constraints configs check between sizes, restated for the shrunk ones: a special token inside the
    shrunk vocabulary, a key head per query head under latent attention (DeepSeek's MLA repeats no keys), a
    state-space mixer's heads times head dim equal to its expanded width, GPT-Neo's
    global/local pattern over the shrunk depth, Qwen-VL's rotary sections summing to half a head."""
    spare = VOCAB - 1
    for name, value in fields.items():
        if (name.endswith(("_token_id", "_token_index")) and isinstance(value, int) and not isinstance(value, bool)
                and value >= VOCAB):
            kwargs[name], spare = spare, spare - 1
    if "kv_lora_rank" in fields and "num_key_value_heads" in fields:  # latent attention: a key per query head
        kwargs["num_key_value_heads"] = HEADS
    if {"expand", "num_heads", "head_dim"} <= fields.keys():  # Mamba-2: heads * head_dim == expand * hidden
        kwargs["num_heads"] = fields["expand"] * HIDDEN // kwargs.get("head_dim", fields["head_dim"])
    if {"mamba_expand", "mamba_n_heads", "mamba_d_head"} <= fields.keys():  # Bamba, Falcon-H1, GraniteMoeHybrid
        kwargs["mamba_n_heads"] = fields["mamba_expand"] * HIDDEN // kwargs.get("mamba_d_head", fields["mamba_d_head"])
    if isinstance(fields.get("attention_types"), list):  # GPT-Neo: [[["global", "local"], 12]]
        pattern = fields["attention_types"][0][0]
        kwargs["attention_types"] = [[pattern, LAYERS // len(pattern)]]
    rope = fields.get("rope_parameters")
    multimodal = "mrope_section" in getattr(config_class, "ignore_keys_at_rope_validation", ())
    if isinstance(rope, dict) and (isinstance(rope.get("mrope_section"), list) or multimodal):
        section = rope.get("mrope_section") or [16, 24, 24]  # Qwen2-VL's modeling default when the config has none
        half = HEAD_DIM // 2
        scaled = [s * half // sum(section) for s in section]
        scaled[0] += half - sum(scaled)
        kwargs["rope_parameters"] = {**rope, "mrope_section": scaled}


def tiny_config(model_type: str) -> Any:
    """``model_type``'s config class built tiny, float32, eager attention (the pattern is a tensor)."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[model_type]
    config = config_class(**shrunk_kwargs(config_class))
    config._attn_implementation = "eager"
    return config
