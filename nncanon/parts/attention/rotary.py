"""Partial and interleaved rotary embeddings: which dimensions of a head turn, and how they pair.

GPT-NeoX turns the first ``rotary_ndims`` dimensions of each head in halves (dimension j with
j + rotary_ndims/2, ``rotate_half``); GPT-J and CodeGen turn the first ``rotary_dim`` in adjacent pairs
(2j with 2j+1, ``rotate_every_two``). A rotation keeps each pair's length and leaves the rest of the head
as projected; a pairing that is not the model's does not keep its pairs' lengths, so the relation tells
the two apart.
"""

from __future__ import annotations

from typing import Any

from ...core.relations import first, relation

HALVES = "halves"
ADJACENT = "adjacent"


def pair_norms(t: Any, d: int, pairing: str) -> Any:
    """Each rotated pair's squared length over the first ``d`` dimensions of the last axis."""
    if pairing == ADJACENT:
        return t[..., 0:d:2].pow(2) + t[..., 1:d:2].pow(2)
    return t[..., : d // 2].pow(2) + t[..., d // 2: d].pow(2)


def rotated(raw: Any, read: Any, d: int, pairing: str) -> list[tuple[Any, Any]]:
    """Pairs for a relation: ``read`` (``[batch, heads, seq, head_dim]``, the call's last seq positions) equals
    ``raw`` past ``d`` and keeps each rotated pair's length on the first ``d``."""
    raw, read = raw.double(), read.double()
    return [(raw[..., d:], read[..., d:]), (pair_norms(raw, d, pairing), pair_norms(read, d, pairing))]


def describe(d: str, pairing: str) -> str:
    """The relation text's clause for a rotation over the first ``d`` dimensions."""
    pairs = "2j with 2j+1, rotate_every_two" if pairing == ADJACENT else f"j with j + {d}/2, rotate_half"
    return (f"equal past {d}, and on the first {d} are a rotation of them (each pair ({pairs}) keeps its "
            "length)")


def projected(dims: str, pairing: str, norms: tuple[str, str] | None = None):
    """The relation of an attention with separate ``q_proj``, ``k_proj``, ``v_proj`` whose partial rotary turns the
    first ``module.<dims>`` dimensions of each head (the whole head when that is None) in ``pairing``. ``norms``:
    the modules that norm the query and key heads before the rotary (Stable LM 2 12B's per-head LayerNorms,
    ``q_layernorm`` and ``k_layernorm``, called on ``[batch, heads, seq, head_dim]``)."""
    q, k = (f"{norms[0]}(q_proj(input) in heads)", f"{norms[1]}(k_proj(input) in heads)") if norms else \
        ("q_proj(input)", "k_proj(input)")
    where = "" if norms else " in heads"

    @relation("attention_values == v_proj(input) in heads; attention_queries and attention_keys (the call's last seq "
              f"positions) are {q} and {k}{where}, " + describe(dims, pairing),
              proves="attention_values", reads="input attention_queries attention_keys attention_values")
    def check(host, r):
        module = host._module
        x = first(r["input"])
        seq, d = x.shape[1], getattr(module, dims) or module.head_dim

        def in_heads(projection, norm=None):
            out = projection(x).unflatten(-1, (-1, module.head_dim)).transpose(1, 2)
            return getattr(module, norm)(out) if norm else out

        q_norm, k_norm = norms or (None, None)
        return [(in_heads(module.v_proj).double(), r["attention_values"][:, :, -seq:].double()),
                *rotated(in_heads(module.q_proj, q_norm), r["attention_queries"], d, pairing),
                *rotated(in_heads(module.k_proj, k_norm), r["attention_keys"][:, :, -seq:], d, pairing)]

    return check
