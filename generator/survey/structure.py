"""The survey's words for a block's structure, measured on one forward as a family page's are: where the norms sit,
what the MLP computes, whether the attention norms its queries and keys (generator/facts/norm_placement.py,
mlp_measure.py), whatever the modules are called."""

from __future__ import annotations

from typing import Any


def structure(tree: Any, model: Any, kwargs: dict) -> list[str]:
    """The tree's shape words with where the blocks' norms sit, what their MLPs compute and whether the attention norms
    its queries and keys measured on one forward, as a family page's are (generator/facts/norm_placement.py,
    mlp_measure.py): glm4's post_self_attn_layernorm is a sandwich, LFM2's w1 / w3 / w2 a gated MLP, whatever they are
    called."""
    import torch

    from generator.facts.mlp_measure import dense_kind
    from generator.facts.norm_placement import block_placement, placements_seen, record

    def run() -> None:
        with torch.no_grad():
            model(**kwargs)

    seen = record(tree.blocks, run)
    kinds = [_mlp_kind(mlp, seen, dense_kind) for _, _, mlp in tree.blocks if mlp is not None and id(mlp) in seen]
    measured = [f"mlp: {kind}" for kind in dict.fromkeys(kinds) if kind in ("mixture", "gated", "plain")]
    named = [word for word in tree.shape if not (measured and word.startswith("mlp: ") and word != "mlp: none")]
    if any(word in ("attention: q/k norms", "attention: plain") for word in named):  # measured, as a family's are
        qk = "attention: q/k norms" if _qk_norms(tree, model, seen) else "attention: plain"
        named = [qk if word in ("attention: q/k norms", "attention: plain") else word for word in named]
    placement = block_placement(placements_seen(tree.blocks, seen)) or "none next to a sublayer"
    return [*named, *measured, f"norms: {placement}"]


def _qk_norms(tree: Any, model: Any, seen: dict) -> bool:
    """A norm inside a block's attention over a head's width or all heads' whose output goes on into the scores
    (norm_placement.has_qk_norms), whatever it is called."""
    from generator.facts.norm_placement import has_qk_norms

    config = model.config.get_text_config()
    heads = getattr(config, "num_attention_heads", None) or 1
    head = getattr(config, "head_dim", None) or config.hidden_size // heads
    widths = {head, head * heads, head * (getattr(config, "num_key_value_heads", None) or heads)}
    return any(mixer is not None and id(mixer) in seen and has_qk_norms(mixer, seen, widths)
               for _, mixer, _ in tree.blocks)


def _mlp_kind(mlp: Any, seen: dict, dense_kind: Any) -> str:
    """"mixture" where the MLP holds experts (a weight stacked over them, or a list of like modules with weights),
    else what its projections compute (mlp_measure.dense_kind)."""
    import torch

    stacked = any(p.dim() >= 3 for p in mlp.parameters())
    listed = any(isinstance(m, torch.nn.ModuleList) and len(m) > 1 and len({type(c) for c in m}) == 1
                 and next(m[0].parameters(), None) is not None for m in mlp.modules())
    return "mixture" if stacked or listed else dense_kind(mlp, set(), seen)
