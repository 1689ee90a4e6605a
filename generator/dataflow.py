"""Which values of a block feed which: ties the block's relations state, oriented by the measured order.

A relation (``nncanon.relations.Relation``) reads some terms and proves others; the terms it reads and
does not prove are what the proved ones are computed from or checked against, so each such pair is tied
by an equation the build checks on every block. The relation does not say which way the data runs:
``mlp_output == routed_output`` proves ``routed_output`` by reading the later ``mlp_output``, and
``states`` are proven from ``state_output``, which the forward produces after them. So each tie is drawn
from the one of its two values the forward produced first (``sequence``, measured by
``nncanon.order``); the renderer checks every drawn arrow against that order again
(``generator/interiors.check_order``), so facts whose edges run against their sequence fail the build.

Term kinds that make edges: a value of the relation's own host (``layer_mid``), a value of a child host
(``mlp.mlp_output``, ``shared_experts.mlp_output``), and ``{mixer}`` filled in with the block's mixer.
Term kinds that make none: a module's call (``input``, ``inputs``, ``output``, ``{mixer}.input``,
``q_norm.output``: not a value row), the root's values (``model.attention_mask``: not a value of the
block), another block's or every block's value (``layers[*].x``, ``layers[-1].x``), and a value this
load did not produce (not in the sequence: its place is not measured).
"""

from __future__ import annotations

from typing import Any

from generator.proof import MODULE_IO, envoys, pattern, relations_of


def _row(host: str, term: str, produced: set[str]) -> str | None:
    """The value row a relation's term names on ``host`` (a path pattern), or None when it makes no edge."""
    if term.startswith("model.") or "[" in term or term.rsplit(".", 1)[-1] in MODULE_IO:
        return None
    row = f"{host}.{term}"
    return row if row in produced else None


def dataflow(model: Any, block: str, sequence: list[str]) -> list[list[str]]:
    """[from row, to row] for every pair of values of the block at ``block`` (``model.layers[3]``, a
    concrete path) and its sublayers tied by one of their relations, each from the one produced first,
    ordered by where the forward produced the target, then the source."""
    at = {row: i for i, row in enumerate(sequence)}
    edges: set[tuple[str, str]] = set()
    for envoy in envoys(model):
        path = envoy._std_path
        if path != block and not path.startswith(block + "."):
            continue
        host = pattern(path)
        for relation in relations_of(envoy):
            proved = {r for t in relation.proves if (r := _row(host, t, set(at)))}
            read = {r for t in relation.reads if t not in relation.proves and (r := _row(host, t, set(at)))}
            for a in read:
                for b in proved - {a}:
                    edges.add((a, b) if at[a] < at[b] else (b, a))
    return [list(e) for e in sorted(edges, key=lambda e: (at[e[1]], at[e[0]]))]
