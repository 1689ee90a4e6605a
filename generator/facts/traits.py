"""What the families index compares, measured, and the tags those measurements can check."""

from __future__ import annotations

from typing import Any

from generator.facts.mlp_measure import fused_gate_up
from generator.facts.mlp_measure import mlp_kind as measured_mlp
from generator.facts.norm_placement import _is_norm, has_qk_norms, norm_form, norms_of, record
from generator.facts.trait_probe import probe
from generator.recipe.family import Family


def norm_gain(norm: Any) -> str:
    """How an RMSNorm applies its weight: measured on a random input against both forms."""
    import torch

    if getattr(norm, "weight", None) is None:
        return "none"  # a norm without a learned gain (OLMo's)
    x = torch.randn(3, norm.weight.shape[-1], generator=torch.Generator().manual_seed(0))
    if norm_form(norm, x) == "LayerNorm":  # centred, measured: its gain as it is, and a bias where it adds one
        with torch.no_grad():  # a constant row centres to zero, so what the norm gives for it is its bias
            bias = norm(torch.full_like(x[:1], 3.0))
        return "weight + bias" if bool(bias.abs().max() > 0) else "weight"
    with torch.no_grad():
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
        rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        out = norm(x)
        # the two candidates differ by rms * 1, of order 1; the norm's own rounding at this scale is far below 1e-4
        if torch.allclose(out, rms * (1 + norm.weight), atol=1e-4):
            return "1 + weight"
        return "weight" if torch.allclose(out, rms * norm.weight, atol=1e-4) else "other"


def _child(envoy: Any, name: str) -> Any:
    """The native module at a standard child name of an envoy (aliases resolve), or None."""
    try:
        return getattr(envoy, name)._module
    except AttributeError:
        return None


def block_mechanics(tiny: Any, config: Any, placement: str | None, probed: dict) -> list[str]:
    """What a block does beyond Llama's: softcaps and multipliers the full-size config sets, a parallel block its
    proven relation shows, and, measured on the forward (generator/facts/trait_probe.py, :func:`fused`), post- or
    sandwich norms, fused projections, positions added to the residual, an embedding narrower than the stream."""
    found = []
    if getattr(config, "attn_logit_softcapping", None):
        found.append("softcapped scores")
    # RecurrentGemma's config calls it logits_soft_cap (its root relation proves logits == cap · tanh(head / cap))
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logits_soft_cap", None):
        found.append("final logit softcap")
    from nncanon.parts.blocks.parallel import parallel_sum

    # the config's switch (GPT-NeoX), or a block proven by the parallel sum (GPT-J's, which has no switch)
    if getattr(config, "use_parallel_residual", False) or any(
            relation.compute is parallel_sum.compute for relation in getattr(type(tiny.all_blocks()[0]), "RELATIONS", ())):
        found.append("parallel block")
    if placement in ("sandwich norms", "post-norm", "norm after each add"):  # measured on the forward, not by names
        found.append(placement)
    if any(getattr(config, name, None) not in (None, 1, 1.0) for name in
           ("embedding_multiplier", "residual_multiplier", "logits_scaling", "attention_multiplier")):
        found.append("multipliers")
    if probed["fused"]:
        found.append("fused projections")
    if probed["positions"]:
        found.append("absolute positions")
    if getattr(config, "do_layer_norm_before", None) is False and "norm after each add" not in found:
        found.append("norm after each add")  # OPT-350m's full size, whose tiny checkpoint may be pre-norm
    if probed["projected"]:  # OPT-350m: an embedding narrower than the stream, projected into it
        found.append("projected embeddings")
    return found


def forward(tiny: Any, family_module: Any = None) -> tuple[list, dict]:
    """Each block's (block, mixer, MLP) native modules and what every module of the blocks read and gave in one
    forward of the tiny checkpoint (generator/facts/norm_placement.py's record): where the norms sit and what the MLPs
    compute are measured on it."""
    import torch

    from generator.facts.norm_placement import record
    from generator.facts.proof import mixer_of

    blocks = tiny.all_blocks()
    spec = [(block._module, _child(block, mixer) if (mixer := mixer_of(block)) else None, _child(block, "mlp"))
            for block in blocks]
    vocab = getattr(tiny._module.config.get_text_config(), "vocab_size", None) or 2
    ids = (torch.arange(8)[None] * 7) % min(vocab, 64)  # any tokens: where a norm sits does not depend on them
    call = {"input_ids": ids}
    if hasattr(family_module, "speech_inputs"):  # a model that takes no text: the family's call
        call = family_module.speech_inputs(tiny)[1]
    decoder_inputs = getattr(tiny.family_module, "decoder_inputs", None)  # T5's forward needs decoder ids
    if decoder_inputs is not None:
        call = decoder_inputs(tiny, (), call)[1]
    with torch.no_grad():
        return spec, record(spec, lambda: tiny._module(**call))


def norm_placement(spec: list, seen: dict) -> str | None:
    """"sandwich norms", "post-norm", "pre-norm" or None (no norm next to a sublayer), from where each block's norms
    take their input and give their output in the recorded forward (:func:`forward`)."""
    from generator.facts.norm_placement import block_placement, placements_seen

    return block_placement(placements_seen(spec, seen))


def heads_of(config: Any) -> int | None:
    """The head width of a config: its head_dim, or hidden_size / num_attention_heads."""
    heads = getattr(config, "num_attention_heads", None)
    return getattr(config, "head_dim", None) or (config.hidden_size // heads if heads else None)


def _in_order(items) -> list:
    return list(dict.fromkeys(items))


def traits(family_module: Any, tiny: Any, full: Any) -> dict:
    """What the families index compares, measured on every block of the tiny checkpoint or read off the
    full-size config (never typed): MLP kinds, block norm and its gain, q/k norms, attention quirks."""
    config = full.text_config
    # the blocks and their parts by their standard names, whatever a family calls them natively
    blocks = tiny.all_blocks()
    layers = [block._module for block in blocks]
    spec, seen = forward(tiny, family_module)
    # measured on the forward (generator/facts/mlp_measure.py), whatever the MLP's modules are called
    kinds = [measured_mlp(block, [mixer, _child(block, "cross_attn")], native, seen, _child(block, "shared_experts"))
             for block, (_, mixer, native) in zip(blocks, spec)]
    mlp = " then ".join(_in_order(kind for kind in kinds if kind is not None))
    # a block's first norm that is one, measured (ModernBERT's first block has an identity where its attention's norm
    # goes: its output scales with its input)
    block_norms = [norm for block in blocks
                   if (norm := next((n for name in ("input_layernorm", "post_attention_layernorm")
                                     if (n := _child(block, name)) is not None and id(n) in seen
                                     and seen[id(n)][0] is not None and _is_norm(n, seen[id(n)][0])),
                                    None)) is not None]
    if not block_norms:  # norms at no standard name (BERT's, inside its attention and output modules): the block's own
        block_norms = [norm for layer in layers for norm in norms_of(layer, seen)]
    gain = " / ".join(_in_order(norm_gain(norm) for norm in block_norms))
    attentions = [attn for block in blocks if (attn := _child(block, "self_attn")) is not None]
    placement = norm_placement(spec, seen)
    probed = probe(tiny, family_module, attentions)  # generator/facts/trait_probe.py: one traced forward
    if any(native is not None and id(native) in seen and fused_gate_up(native, seen) for _, _, native in spec):
        probed["fused"] = sorted([*probed["fused"], "gate/up"])
    quirks = []
    rope = dict(getattr(config, "rope_parameters", None) or {})
    # q/k norms measured (norm_placement.has_qk_norms): StableLM's per head q_layernorm, Hunyuan's query_layernorm,
    # OLMo 2's across every head; a latent's norm (DeepSeek's kv_a_layernorm) is over the latent's own width, which
    # the tiny recipes size apart from every head width
    widths = {tiny.head_dim * n for n in (1, tiny.num_heads, getattr(tiny, "num_kv_heads", None) or 1)}
    if any(has_qk_norms(attn, seen, widths) for attn in attentions):
        quirks.append("q/k norms")
    if probed["gated_output"]:  # the heads' outputs times a sigmoid gate before the output projection
        quirks.append("gated output")
    if probed["latent"]:  # the values rebuilt from a latent narrower than the stream
        quirks.append("latent attention")
    if rope.get("partial_rotary_factor", 1.0) < 1.0:
        quirks.append(f"partial rotary ({rope['partial_rotary_factor']:g})")
    elif getattr(config, "rotary_dim", None) and heads_of(config) and config.rotary_dim < heads_of(config):
        # GPT-J and CodeGen give the rotated width itself (rotary_dim), not a fraction of the head
        quirks.append(f"partial rotary ({config.rotary_dim / heads_of(config):g})")
    if rope.get("mrope_section"):
        quirks.append("multimodal rotary")
    if rope.get("rope_type") not in (None, "default"):
        quirks.append(f"{rope['rope_type']} rope scaling")
    heads = getattr(config, "num_attention_heads", None)  # None on a state-space config (Mamba-2)
    # Falcon's config says num_kv_heads, which multi_query (7B) overrides to one in the attention: read its module
    falcon_style = any(hasattr(attn, "num_kv_heads") and hasattr(attn, "num_heads") and attn.num_kv_heads < attn.num_heads
                       for attn in attentions)
    if heads is not None and getattr(config, "num_key_value_heads", heads) < heads or falcon_style:
        quirks.append("grouped-query")
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        quirks.append("sliding window")
    # centred or not, measured on what each norm read in the forward (generator/facts/norm_placement.py)
    kind = " / ".join(_in_order(norm_form(n, seen[id(n)][0]) for n in block_norms if seen.get(id(n), [None])[0] is not None))
    return {"mlp": mlp, "norm": kind, "norm_kinds": " / ".join(_in_order(norm_form(n, seen[id(n)][0]) for layer in layers
                                                                      for n in norms_of(layer, seen))),
            "fused": probed["fused"],
            # the biases a tag may name, and whether the tiny router's chosen weights sum to one (what a relation
            # renormalising "when norm_topk_prob" is checked against)
            "attention_bias": probed["attention_bias"], "renormalised": probed["renormalised"],
            "norm_gain": gain, "attention": quirks, "norm_placement": placement,
            "block": block_mechanics(tiny, config, placement, probed),
            "block_kinds": sorted(set(family_module.layer_types(full)))}


def vision_norm(model: Any, family_module: Any, prompts: list[str]) -> str:
    """The kinds of norm the vision encoder's first block runs, measured as the text blocks' are (a norm is scale
    invariant, a LayerNorm centres: generator/facts/norm_placement.py) in one forward of the image load."""
    from generator.facts.measure import run_inputs
    from generator.facts.proof import read_all

    layer = model.get("vision.layers.0")._module
    args, kwargs = run_inputs(model, family_module, prompts)
    seen = record([(layer, None, None)], lambda: read_all(model, {}, args, kwargs))
    return " / ".join(_in_order(norm_form(n, seen[id(n)][0]) for n in norms_of(layer, seen)))


def check_tags(family: Family, facts: dict) -> None:
    """Every tag and tagline phrase holds on the facts (generator/facts/tags.py has the vocabulary)."""
    from generator.facts import tags

    tags.check_tags(family, facts)
