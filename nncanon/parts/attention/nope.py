"""NoPE blocks: attention whose queries and keys get the rotary embedding on some blocks and no position
signal at all on others (SmolLM3's ``no_rope_layers``: every fourth block; Cohere 2's full-attention blocks).

The shared attention relations (nncanon.parts.attention.softmax) take ``attention_queries`` and ``attention_keys`` as
the attention function receives them, so they hold whether or not a block rotated them. What a NoPE block
means is stated here: its queries and keys are the projections of the attention's input split into heads,
not rotated, while every other block's are those projections rotated by the rotary tables the block was
handed (``position_embeddings``). A family gives its attention module's flag (``use_rope``) and its modeling
module's ``apply_rotary_pos_emb``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...core.relations import Relation, first, relation


def rotary_or_not(rotate: Callable[..., tuple[Any, Any]], flag: str | Callable[[Any], bool] = "use_rope",
                  rotated_on: str | None = None, nope_on: str | None = None, normed: bool | str = False) -> Relation:
    """``attention_queries``/``attention_keys`` == q_proj/k_proj of the input per head, rotated by ``rotate``
    (cos, sin from the block's ``position_embeddings``) where the module's ``flag`` is set, not rotated where
    it is not (a NoPE block). ``rotated_on`` and ``nope_on`` say in the relation's text which blocks those are
    (Cohere 2's flag is its sliding window: the sliding blocks rotate, the full ones do not). ``flag`` is the
    module's attribute, or a function of the module where the forward decides by more than one (EXAONE 4).
    ``normed``: each head is normed first, by the module's ``q_norm`` and ``k_norm`` (per-head norms); ``"whole"``:
    the whole projection is normed as one vector before the heads are split (OLMo 2's norms, OLMo Hybrid's)."""
    rotated_on = rotated_on or f"where {flag}"
    nope_on = nope_on or f"on a NoPE block ({flag} false)"
    rotates = flag if callable(flag) else (lambda module: getattr(module, flag))
    heads = ("RMS-normed across every head by q_norm, k_norm, split into heads," if normed == "whole" else
             "split into heads, each RMS-normed by q_norm, k_norm," if normed else "split into heads:")

    @relation(f"attention_queries, attention_keys == q_proj(input), k_proj(input) {heads} rotated by the "
              f"rotary embedding {rotated_on}; not rotated {nope_on}, no position signal at all",
              proves="attention_queries attention_keys", reads="inputs attention_queries attention_keys")
    def positions(host, r):
        module, (args, kwargs) = host._module, r["inputs"]
        x = first(args) if args else kwargs["hidden_states"]
        q, k = module.q_proj(x), module.k_proj(x)
        if normed == "whole":
            q, k = module.q_norm(q), module.k_norm(k)
        q = q.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)
        k = k.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)
        if normed is True:
            q, k = module.q_norm(q), module.k_norm(k)
        if rotates(module):
            embeddings = kwargs["position_embeddings"] if "position_embeddings" in kwargs else args[1]
            q, k = rotate(q, k, *embeddings)
        return [(q, r["attention_queries"]), (k, r["attention_keys"][:, :, -x.shape[1]:])]

    return positions


def nope_layer_types(model: Any, flag_list: str = "no_rope_layers") -> list[str]:
    """The config's layer types, with ``nope_attention`` for every block whose entry in ``flag_list`` is 0 (no
    rotary): the page draws and names the NoPE blocks as a kind of their own."""
    from ..blocks.decoder import attention_layer_types

    flags = getattr(model.text_config, flag_list)
    return ["nope_attention" if not flags[i] else kind for i, kind in enumerate(attention_layer_types(model))]
