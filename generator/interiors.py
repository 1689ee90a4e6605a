"""Inside each block kind: every value of its hosts, drawn in the order one forward produced them.

Collect measures that order (``stack.block_kinds[].sequence``, from :func:`nncanon.order.block_sequence`);
:func:`interior` draws it as runs of value chips, one run per stretch of the forward spent on one host
(the block itself, its mixer, its MLP, a child such as ``shared_experts``), an arrow from each value to
the next one produced. :func:`check_order` fails the build when an arrow of a block's diagram (its
residual row or its interior) points from a value to one the forward produced before it, and
:func:`undrawn` lists every value of the page no part draws, with why.
"""

from __future__ import annotations

from generator.claim_error import ClaimError
from generator.diagrams import Box, Links
from generator.escaping import slug


def interior(kind: dict, lookup: dict, links: Links, prefix: str) -> dict:
    """Runs of chips (``Box`` parts, ``cls`` nc-chip) in measured order; ``boxes`` all chips, ``edges``
    the arrows drawn between them (each chip to the next), as (part path, value row) pairs."""
    runs: list[dict] = []
    for row in kind.get("sequence") or []:
        host, _, name = row.rpartition(".")
        if (host, name) not in lookup:
            continue  # a value of a host class this page does not list: nothing for a card to say
        # a chip is one value: its own row, and its host's printout line (not every row of the host, as a module's)
        rows = [row] if row in links.rows else []
        lines = [p for p in (host, row) if p in links.lines]
        path = row[len("model."):]
        chip = Box(name, id=f"{prefix}-{slug(path)}", path=path, value=name, title=row, cls="nc-chip",
                   module=host if links.module(host) else "", value_row=row if row in links.rows else "",
                   rows=rows, lines=lines)
        if not runs or runs[-1]["host"] != host:
            label = host[len("model."):].replace("layers[i]", "block", 1)
            runs.append({"host": host, "label": label, "chips": []})
        runs[-1]["chips"].append(chip)
    boxes = [c for r in runs for c in r["chips"]]
    edges = [((a.path, a.value_row), (b.path, b.value_row)) for a, b in zip(boxes, boxes[1:])]
    return {"runs": runs, "boxes": boxes, "edges": edges}


def check_order(family: str, kind: str, sequence: list[str], edges: list) -> None:
    """Every arrow drawn between two parts that carry values runs from the one produced first."""
    at = {row: i for i, row in enumerate(sequence)}
    for (a, a_row), (b, b_row) in edges:
        if a_row in at and b_row in at and a_row != b_row and at[a_row] > at[b_row]:
            raise ClaimError(family, f"page.block_kinds.{kind}.parts", f"the diagram draws {a} → {b}, but the "
                             f"forward produces {b_row} before {a_row}: order the parts as the forward runs")


def undrawn(facts: dict, drawn: set[str]) -> list[dict]:
    """Each value row of the page no diagram part draws, with why (grouped per host, in the tables' order)."""
    loads = sorted({k.get("sequence_load") for k in facts["stack"].get("block_kinds", []) if k.get("sequence_load")})
    out = []
    for host in facts["hosts"]:
        for v in host["values"]:
            row = f"{host['path']}.{v['name']}"
            if row in drawn:
                continue
            needs = "; ".join(c["needs"] for c in v.get("conditions") or [] if c.get("needs"))
            if host.get("section") == "vision":
                why = "a vision encoder value: the forward order is measured on a text prompt, which never runs it"
            elif "[i]" not in host["path"]:
                why = "a value of the whole model: the stack's chain draws only its embeddings, norm and head"
            else:
                why = (f"not produced by one forward of the tiny checkpoint under {', '.join(loads) or 'any load'}"
                       + (f" (needs {needs})" if needs else "") + ": its place in the order is not measured")
            out.append({"row": row, "why": why})
    return out
