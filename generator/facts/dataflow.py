"""Which values of a block feed which: the values each of the block's relations ties, oriented by the
measured order.

A relation (``nncanon.core.relations.Relation``) is an equation the build checks on every block; its text
says which of its terms stand on which side: ``attention_probabilities == softmax(attention_scores)``
ties the scores to the probabilities, ``layer_input + linear_attn.attention_output == layer_mid`` ties
each addend to the sum (not the addends to each other). So two of a relation's terms are tied when they
appear on different sides of one ``==`` of one clause (clauses split at ``;``) of its text. A relation
whose text names none of its terms that way ties what it reads and does not prove to what it proves.
Neither says which way the data runs (``mlp_output == routed_output`` holds both ways round), so each
tie is drawn from the one of its two values the forward produced first (``sequence``, measured by
``nncanon.guards.order``); the renderer checks every drawn arrow against that order again
(``generator/interiors.check_order``), so facts whose edges run against their sequence fail the build.

Term kinds that make edges: a value of the relation's own host (``layer_mid``), a value of a child host
(``mlp.mlp_output``, ``shared_experts.mlp_output``), and ``{mixer}`` filled in with the block's mixer.
Term kinds that make none: a module's call (``input``, ``inputs``, ``output``, ``{mixer}.input``,
``q_norm.output``: not a value row), the root's values (``model.attention_mask``: not a value of the
block), another block's or every block's value (``layers[*].x``, ``layers[-1].x``), and a value this
load did not produce (not in the sequence: its place is not measured).
"""

from __future__ import annotations

import re
from typing import Any

from generator.facts.proof import MODULE_IO, envoys, pattern, relations_of


def _row(host: str, term: str, produced: set[str]) -> str | None:
    """The value row a relation's term names on ``host`` (a path pattern), or None when it makes no edge."""
    if term.startswith("model.") or "[" in term or term.rsplit(".", 1)[-1] in MODULE_IO:
        return None
    row = f"{host}.{term}"
    return row if row in produced else None


def ties(relation: Any) -> set[tuple[str, str]]:
    """Pairs of the relation's terms on different sides of one ``==`` of one clause of its text; else what it
    reads and does not prove against what it proves."""
    terms = set(relation.reads) | set(relation.proves)
    out = set()
    for clause in relation.text.split(";"):
        # a term stands alone: not the tail of a longer path, not the head of a longer name (ᵀ may follow)
        sides = [{t for t in terms if re.search(rf"(?<![\w.\]]){re.escape(t)}(?![A-Za-z0-9_])", side)}
                 for side in clause.split("==")]
        out |= {(a, b) for i, side in enumerate(sides) for other in sides[i + 1:] for a in side for b in other
                if a != b}
    if not out:
        out = {(a, b) for a in relation.reads if a not in relation.proves for b in relation.proves}
    return out


def dataflow(model: Any, block: str, sequence: list[str]) -> list[list[str]]:
    """[from row, to row] for every pair of values of the block at ``block`` (``model.layers[3]``, a
    concrete path) and its sublayers one of their relations ties (:func:`ties`), from the one produced first,
    ordered by where the forward produced the target, then the source."""
    at = {row: i for i, row in enumerate(sequence)}
    edges: set[tuple[str, str]] = set()
    for envoy in envoys(model):
        path = envoy._std_path
        if path != block and not path.startswith(block + "."):
            continue
        host = pattern(path)
        for relation in relations_of(envoy):
            for s, t in ties(relation):
                a, b = _row(host, s, set(at)), _row(host, t, set(at))
                if a and b and a != b:
                    edges.add((a, b) if at[a] < at[b] else (b, a))
    return [list(e) for e in sorted(edges, key=lambda e: (at[e[1]], at[e[0]]))]
