"""A model type's config class, shrunk to a tiny config: every size small, none two of them equal where a
layout could confuse them, as the family recipes (families/*.yaml ``tiny:``) choose theirs.

No recipe exists for a model type the survey meets for the first time, so the sizes are set by the config's
own field names (``hidden_size``, ``n_embd``, ``d_model``, ...), on the config and every sub-config it
holds (a vision tower's, an audio tower's), and the config class derives the rest (``layer_types`` from
``num_hidden_layers``, a head dim from the hidden size). A field this table does not know keeps the class's
default: the survey says what breaks, it does not guess a fix per model type.
"""

from __future__ import annotations

import ast
import re
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
    # a tower's copy of the text width it projects into (Inkling 2's vision_config.text_hidden_size)
    "text_hidden_size": HIDDEN,
    # other spellings of the MLP width (CTRL's dff, CPM-Ant's dim_ff) and of a per-layer embedding's vocabulary
    "dff": MLP, "dim_ff": MLP, "vocab_size_per_layer_input": VOCAB,
    # one codebook (MusicGen's decoder reads batch x codebooks rows of ids): six ids are one prompt
    "num_codebooks": 1,
    # a vision adapter's widths, the tower's into the text's (dots.3's)
    "adapter_in_dim": HIDDEN, "adapter_out_dim": HIDDEN,
    # a VQ image model's convolution widths (Janus's image generator)
    "base_channels": 32, "latent_channels": 32,  # a multiple of its group norms' 32 groups
    # a tower's widths per stage (Florence-2's DaViT [128, ..., 1024], an audio tower's hidden_sizes): scaled, the
    # widest this one
    "hidden_sizes": HIDDEN,
    # BLT's hash embeddings and global width, a projector's and an expert's width (Muse Spark), a VQ codebook (Janus)
    "encoder_hash_byte_group_vocab": VOCAB, "hidden_size_global": HIDDEN, "moe_hidden_size": EXPERT_MLP,
    "projector_hidden_size": 32, "num_embeddings": VOCAB, "image_token_embed_dim": 32,
}

#: a head's width by every name a config spells it. A config may default it to None, meaning hidden / heads, while
#: its attention reads ``getattr(config, "head_dim", hidden // heads)``, which finds the None (Ministral's and
#: HunYuan's: ``None ** -0.5`` fails the build): the shrunk config states it, the same width hidden / heads gives
HEAD_DIMS = ("head_dim", "kv_channels", "attention_head_dim")
assert HIDDEN // HEADS == HEAD_DIM

#: fields whose default is a per-layer list or pattern sized for the full model: dropped, so the config
#: class derives them from the shrunk depth (a field it cannot derive keeps the default and may fail)
PER_LAYER = ("layer_types", "layers_block_type", "block_types", "mlp_only_layers", "full_attn_idxs")


class DefaultsRefused(ValueError):
    """The config class refuses its own defaults (Gemma 4's assistant checks a text config its defaults build
    otherwise): there is nothing to shrink from, only a published config.json to start at."""


def defaults_of(config_class: type) -> Any:
    try:
        return config_class()
    except Exception as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        raise DefaultsRefused(f"{config_class.__name__}() refuses its own defaults: {lines[-1] if lines else error}") \
            from error


def _per_layer(overrides: dict[str, Any]) -> dict[str, Any]:
    """One layer's overrides shrunk as the config's own sizes are; a layer with as many key heads as query heads
    (dots.3's latent-attention layers) keeps them equal."""
    shrunk = {name: SIZES.get(name, v) if isinstance(v, int) and not isinstance(v, bool) else v
              for name, v in overrides.items()}
    if "num_key_value_heads" in overrides and overrides["num_key_value_heads"] == overrides.get("num_attention_heads"):
        shrunk["num_key_value_heads"] = shrunk["num_attention_heads"]
    return shrunk


def _ints(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def shrunk_kwargs(config_class: type, depth: int = 0) -> dict[str, Any]:
    """The keyword arguments that build ``config_class`` tiny: the sizes it has fields for, and each
    sub-config's own shrunk arguments."""
    from transformers import PretrainedConfig

    default = defaults_of(config_class)
    fields = default.to_dict()
    aliases = getattr(config_class, "attribute_map", {}) or {}
    kwargs: dict[str, Any] = {}
    # a sub-config is read by the names the class declares: reading every field would raise on a per-layer one
    # (Gemma 4's head_dim: "access it via the individual layer configs")
    subs = set(getattr(config_class, "sub_configs", None) or {})
    for name, value in fields.items():
        attr = getattr(default, name, None) if name in subs else None
        if isinstance(attr, PretrainedConfig) and depth < 3:
            kwargs[name] = {**shrunk_kwargs(type(attr), depth + 1), "model_type": attr.model_type}
        elif name in SIZES and isinstance(value, int) and not isinstance(value, bool) and value != 0:
            kwargs[name] = SIZES[name]  # a size the default has at 0 is a part it does not have (GLM-5 Next's RoPE dim)
        elif name in SIZES and _ints(value) and len(value) == fields.get("num_hidden_layers"):  # one per layer
            kwargs[name] = [SIZES[name]] * LAYERS  # (Gemma 3n's MLP widths)
        elif name in SIZES and _ints(value) and max(value) > SIZES[name]:  # one per stage: the ratios kept
            kwargs[name] = [max(1, v * SIZES[name] // max(value)) for v in value]
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
    if isinstance(fields.get("per_layer_config"), dict) and "num_hidden_layers" in kwargs:  # dots.3's overrides by layer
        kwargs["per_layer_config"] = {k: _per_layer(layer) for k, layer in fields["per_layer_config"].items()
                                      if int(k) < LAYERS}
    # the last layers share earlier ones' keys and values (Gemma 3n: 15 of 35): at the shrunk depth, half, so that some
    # layers still produce them (a Gemma 4 sharing none is left so)
    if isinstance(fields.get("num_kv_shared_layers"), int) and fields["num_kv_shared_layers"] >= LAYERS:
        kwargs["num_kv_shared_layers"] = LAYERS // 2
    _consistent(fields, kwargs, config_class)
    return kwargs


def _modeling_source(config_class: type) -> str:
    """The text of the modeling file beside ``config_class``'s (empty where there is none): a modeling file that
    reads ``mrope_section`` with a default of its own (PaddleOCR-VL's) needs sections sized to the shrunk head
    though its config states none."""
    import importlib.util

    spec = importlib.util.find_spec(config_class.__module__.replace(".configuration_", ".modeling_"))
    try:
        return open(spec.origin, encoding="utf-8").read() if spec and spec.origin else ""
    except OSError:
        return ""


def _consistent(fields: dict[str, Any], kwargs: dict[str, Any], config_class: type) -> None:
    """The constraints configs check between sizes, restated for the shrunk ones: a special token inside the
    shrunk vocabulary, a key head per query head under latent attention (DeepSeek's MLA repeats no keys), a
    state-space mixer's heads times head dim equal to its expanded width, GPT-Neo's
    global/local pattern over the shrunk depth, Qwen-VL's rotary sections summing to half a head."""
    spare = VOCAB - 1
    if fields.get("num_key_value_heads", 0) is None and "num_attention_heads" in kwargs:  # None: one per query head
        kwargs["num_key_value_heads"] = kwargs["num_attention_heads"]
    if fields.get("default_language", 0) is None and isinstance(fields.get("languages"), list) and fields["languages"]:
        kwargs["default_language"] = fields["languages"][0]  # X-MOD's forward needs one: the first it names
    for name, period in fields.items():  # a layer pattern (Zamba's hybrid every 6th from the 4th): twice in the depth
        offset = f"{name[:-len('_period')]}_offset"
        if name.endswith("_period") and isinstance(period, int) and period > LAYERS // 2 and \
                isinstance(fields.get(offset), int):
            kwargs[name], kwargs[offset] = LAYERS // 2, fields[offset] % (LAYERS // 2)
    if _ints(fields.get("axial_pos_embds_dim")):  # Reformer's axial positions: widths summing to the hidden size,
        kwargs["axial_pos_embds_dim"] = [HIDDEN // 2] * 2  # a grid as large as the positions
        kwargs["axial_pos_shape"] = [8, SIZES["max_position_embeddings"] // 8]
    if "is_decoder" in fields:  # the survey builds causal LMs: a BERT-like class is one only as a decoder (Reformer)
        kwargs["is_decoder"] = True
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
    for name in ("vision_feature_layer", "vision_feature_layers"):  # a tap indexed in the full tower (Molmo 2's [24, 18])
        taps = fields.get(name)
        if isinstance(taps, list) and all(isinstance(t, int) and t >= 0 for t in taps):
            kwargs[name] = [-1 - i for i in range(len(taps))]
        elif isinstance(taps, int) and not isinstance(taps, bool) and taps >= 0:
            kwargs[name] = -1
    rope = fields.get("rope_parameters")
    multimodal = ("mrope_section" in getattr(config_class, "ignore_keys_at_rope_validation", ())
                  or "mrope_section" in _modeling_source(config_class))
    # an empty rope dict states no sections (Cohere Compass's: its strict type takes no list there)
    if isinstance(rope, dict) and (isinstance(rope.get("mrope_section"), list) or (multimodal and rope)):
        # the config's sections, else the modeling file's default (ERNIE 4.5 VL's [22, 22, 20]), else Qwen2-VL's
        read = re.search(r"""mrope_section["']\s*,\s*\[([\d,\s]+)\]""", _modeling_source(config_class))
        section = rope.get("mrope_section") or ([int(v) for v in read.group(1).split(",")] if read else [16, 24, 24])
        # the sections cover the rotated half of a head: all of it, or its partial_rotary_factor (GLM-4.5V's half)
        factor = rope.get("partial_rotary_factor") or fields.get("partial_rotary_factor") or 1
        half = int(HEAD_DIM * factor) // 2
        scaled = [s * half // sum(section) for s in section]
        # what rounding left goes to a section of a size no other has: equal sections stay equal (ERNIE 4.5 VL stacks
        # its height and width sections, [22, 22, 20])
        odd = next((i for i, v in enumerate(section) if section.count(v) == 1), 0)
        scaled[odd] += half - sum(scaled)
        # a rope dict is typed by its rope_type (Cohere Compass's default has none: the strict check refuses it)
        kwargs["rope_parameters"] = {"rope_type": "default", **rope, "mrope_section": scaled}


#: how many times a config's own check may correct the shrink (each names the field it wants)
CORRECTIONS = 4


def obey(message: str, kwargs: dict[str, Any], defaults: dict[str, Any]) -> bool:
    """Correct ``kwargs`` as a config's validation ``message`` says: "x must be 0, got 256" sets x to 0 (Gemma 4's
    assistant), a field the message quotes that the shrink set is left to the class's default (ZAYA's
    "`num_experts_per_tok=1` only"). Dotted names reach into a sub-config's arguments; ``defaults``: the class's
    default fields (``to_dict``), where a field the shrink did not set is found. False: nothing to correct."""
    def slot(path: str) -> tuple[dict, str] | None:
        *parents, last = path.split(".")
        where: Any = kwargs
        for name in parents:
            where = where.get(name) if isinstance(where, dict) else None
        return (where, last) if isinstance(where, dict) else None

    def held(name: str) -> list[tuple[dict, str]]:
        return [(kwargs, name)] if name in defaults else [
            (kwargs[sub], name) for sub, value in defaults.items()
            if isinstance(value, dict) and name in value and isinstance(kwargs.get(sub), dict)]

    def anywhere(name: str) -> list[tuple[dict, str]]:
        found = [(kwargs, name)] if name in kwargs else []
        return found + [(sub, name) for sub in kwargs.values() if isinstance(sub, dict) and name in sub]

    changed = False
    # "adapter_in_dim must match hidden_size" (dots.3's vision adapter): the one takes the other's value beside it
    for field, other in re.findall(r"(\w+) must (?:match|equal) (\w+)(?![\w ]*\+)", message):
        for where, _ in anywhere(field) or held(field):
            value = where.get(other, kwargs.get(other))
            if isinstance(value, int) and where.get(field) != value:
                where[field], changed = value, True
    # "head_dim must equal qk_nope_head_dim + qk_rope_head_dim" (dots.3's SWA layers): the sum of what was set
    for total, *terms in re.findall(r"(\w+) must equal (\w+) \+ (\w+)", message):
        for where, _ in anywhere(total):
            if all(isinstance(where.get(t), int) for t in terms):
                where[total], changed = sum(where[t] for t in terms), True
    # "`a` (x) and `b` (y) must be equal", "`a` (x) must match `b` (y)": a takes b's value
    for path, value in re.findall(r"`([\w.]+)` \([^)]*\) (?:and|must match) `[\w.]+` \(([^)]*)\)", message):
        where = slot(path)
        if where is not None:
            try:
                where[0][where[1]] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                continue
            changed = True
    for path, value in re.findall(r"`?([A-Za-z_][\w.]*)`? must be (-?\d+), got", message):
        # a field the shrink left at its default is set where the class's defaults have it (Gemma 4's assistant checks
        # its text config's hidden_size_per_layer_input)
        for where, name in ([s] if (s := slot(path)) and "." in path else anywhere(path) or held(path)):
            if where.get(name) != int(value):
                where[name], changed = int(value), True
    for path in re.findall(r"[`'\"]([A-Za-z_][\w.]*)(?:=[^`'\"]*)?[`'\"]", message):
        for where, name in ([s] if (s := slot(path)) and "." in path else anywhere(path)):
            if name in where and name in SIZES:
                del where[name]
                changed = True
    return changed


def tiny_config(model_type: str, key_per_query: bool = False) -> Any:
    """``model_type``'s config class built tiny, float32, eager attention (the pattern is a tensor). Where the
    class's own validation refuses a shrunk size and names the field, it is corrected as the check says
    (`obey`), a few times at most; a check naming nothing the shrink set is the row's answer."""
    from transformers import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[model_type]
    kwargs = shrunk_kwargs(config_class)
    # ``key_per_query``: a key head per query head, for an attention that repeats no keys (Unlimited-OCR's)
    for where in [kwargs, *(v for v in kwargs.values() if isinstance(v, dict))] if key_per_query else []:
        if "num_key_value_heads" in where and "num_attention_heads" in where:
            where["num_key_value_heads"] = where["num_attention_heads"]
    defaults: dict[str, Any] | None = None
    for attempt in range(CORRECTIONS + 1):
        try:
            config = config_class(**kwargs)
            break
        except Exception as error:  # huggingface_hub's strict-dataclass errors are no ValueError
            defaults = defaults_of(config_class).to_dict() if defaults is None else defaults
            if attempt == CORRECTIONS or not obey(str(error), kwargs, defaults):
                raise
    try:
        text = config.get_text_config()
    except ValueError:  # several text configs (MusicGen's text encoder and decoder): none is the stack's alone
        text = None
    if getattr(text, "sliding_window", 0) is None and isinstance(getattr(text, "layer_types", None), list) and \
            "sliding_attention" not in text.layer_types:
        # no sliding layer and no window, yet the forward builds a sliding mask for the kinds it has none of (Step
        # 3.7's): a window for it, which no layer reads
        text.sliding_window = SEQ - 2
    config._attn_implementation = "eager"
    return config
