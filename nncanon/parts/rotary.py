"""Partial and interleaved rotary embeddings: which dimensions of a head turn, and how they pair.

GPT-NeoX turns the first ``rotary_ndims`` dimensions of each head in halves (dimension j with
j + rotary_ndims/2, ``rotate_half``); GPT-J and CodeGen turn the first ``rotary_dim`` in adjacent pairs
(2j with 2j+1, ``rotate_every_two``). A rotation keeps each pair's length and leaves the rest of the head
as projected; a pairing that is not the model's does not keep its pairs' lengths, so the relation tells
the two apart.
"""

from __future__ import annotations

from typing import Any

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
