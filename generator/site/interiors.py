"""Inside each block kind: every value of its hosts, one chip per value in the order one forward produced
them, and arrows for which values feed which.

Collect measures the order (``sequence``, from :func:`nncanon.guards.order.block_sequence`, the vision block's
from :func:`nncanon.guards.order.vision_block_sequence`) and the dataflow (``dataflow``: pairs of values a relation
ties, from the one produced first; ``generator/facts/dataflow.py``). :func:`interior` draws the chips top to
bottom in that order, grouped under the host each stretch of the forward ran on (the block, its mixer, its
MLP, a child such as ``shared_experts``), with an arc on the left for each dataflow pair (solid) and, for a
value no relation ties to an earlier one, a dashed arc from the value produced just before it (the order
is all that is known of it). :func:`check_order` fails the build when an arrow of a block's diagram (its
residual row, its dataflow, the order fallback) points from a value to one the forward produced before it,
and :func:`undrawn` lists every value of the page no part draws, with why.
"""

from __future__ import annotations

from generator.facts.claim_error import ClaimError
from generator.site.diagrams import CHAR, Box, Links
from generator.site.escaping import slug

ROW, CHIP, HEAD, GAP = 24.0, 19.0, 19.0, 8.0  # px: a chip's row, its height, a host's heading, between hosts


def _bulge(span: int) -> float:
    """How far left an arc spanning ``span`` chips reaches: longer arcs wider, so nested arcs do not overlap."""
    return 9.0 + 8.0 * span ** 0.6


def interior(kind: dict, lookup: dict, links: Links, prefix: str, section: str = "text") -> dict:
    """Chips (``Box`` parts, ``cls`` nc-chip) in measured order under their hosts' headings, the arcs between
    them, and ``edges``: every arrow drawn, as (part path, value row) pairs, for :func:`check_order`."""
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
                   rows=rows, lines=lines, section=section)
        if not runs or runs[-1]["host"] != host:
            label = (host[len("model."):] or "model").replace("layers[i]", "block", 1).replace(
                "vision.block", "vision block", 1)  # the root's values (the Mechanics page's chains) under "model"
            runs.append({"host": host, "label": label, "chips": []})
        runs[-1]["chips"].append(chip)
    boxes = [c for r in runs for c in r["chips"]]
    by_row = {b.value_row or f"model.{b.path}": b for b in boxes}
    at = {b.id: i for i, b in enumerate(boxes)}
    # the dataflow's pairs between drawn chips; a pair naming a value not drawn is still checked (check_order)
    flows = [(by_row.get(a), by_row.get(b), a, b) for a, b in kind.get("dataflow") or []]
    fed = {b.id for _, b, _, _ in flows if b is not None}
    arcs = [(a, b, "flow") for a, b, _, _ in flows if a is not None and b is not None]
    arcs += [(p, c, "order") for p, c in zip(boxes, boxes[1:]) if c.id not in fed]
    reach = max((_bulge(abs(at[b.id] - at[a.id])) for a, b, _ in arcs), default=0.0)
    left = reach + 14.0
    y, width = 4.0, 0.0
    for run in runs:
        run["y"], run["x"] = y, left - 6
        y += HEAD
        for chip in run["chips"]:
            chip.x, chip.y, chip.h = left, y, CHIP
            chip.w = len(chip.label) * CHAR * 0.92 + 14
            y += ROW
        run["w"] = max([len(run["label"]) * CHAR * 0.85 + 12] + [c.w + 12 for c in run["chips"]])
        run["h"] = y - run["y"] - (ROW - CHIP) + 5
        width = max(width, run["x"] + run["w"])
        y += GAP
    for a, b, how in arcs:
        b.inputs.append((a.path, how))
    drawn = []
    for a, b, how in sorted(arcs, key=lambda e: (e[2] != "order", at[e[1].id] - at[e[0].id])):
        y1, y2 = a.y + CHIP / 2 + 2, b.y + CHIP / 2 - 2
        x, bend = left, left - _bulge(at[b.id] - at[a.id])
        drawn.append({"d": f"M{x:.0f},{y1:.0f}C{bend:.0f},{y1:.0f} {bend:.0f},{y2:.0f} {x - 1:.0f},{y2:.0f}",
                      "how": how, "from": a.id, "to": b.id})
    edges = [((a.path, a.value_row), (b.path, b.value_row)) for a, b, _ in arcs]
    edges += [((ra[len("model."):], ra), (rb[len("model."):], rb)) for a, b, ra, rb in flows if a is None or b is None]
    return {"runs": runs, "boxes": boxes, "arcs": drawn, "edges": edges, "width": width + 8,
            "height": y - GAP + 4, "kinds": sorted({how for *_, how in arcs})}


def check_order(family: str, where: str, sequence: list[str], edges: list, dataflow: list = ()) -> None:
    """Every arrow drawn between two parts that carry values runs from the one produced first; every
    dataflow pair names two values the sequence measured (else its direction is unchecked)."""
    at = {row: i for i, row in enumerate(sequence)}
    for a_row, b_row in dataflow:
        missing = [r for r in (a_row, b_row) if r not in at]
        if missing:
            raise ClaimError(family, f"{where}.dataflow", f"the pair {a_row} → {b_row} names {missing[0]}, which "
                             f"the measured sequence lacks: re-run `python -m generator build` to re-collect")
    for (a, a_row), (b, b_row) in edges:
        if a_row in at and b_row in at and a_row != b_row and at[a_row] > at[b_row]:
            raise ClaimError(family, f"{where}.parts", f"the diagram draws {a} → {b}, but the "
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
            # what the value needs, else why no load serves it (a condition with no remedy states only its why)
            needs = "; ".join(f"needs {c['needs']}" if c.get("needs") else c.get("why") or ""
                              for c in v.get("conditions") or [] if c.get("needs") or c.get("why"))
            if not any((v.get("availability") or {"any": True}).values()):
                why = "not served under any load" + (f": {needs}" if needs else "")
            elif host["path"].startswith("model.vision.layers[i]"):
                why = ("not produced by one forward of the tiny checkpoint on the image prompt"
                       + (f" ({needs})" if needs else "") + ": its place in the order is not measured")
            elif host.get("section") == "vision":
                why = "a value of the encoder outside its blocks: its chain draws only the image's path"
            elif host["path"] != "model" and "[i]" not in host["path"]:  # an encoder-decoder's stack
                why = (f"a value of {host['path']} outside its blocks: the stacks' drawing draws each stack's "
                       "embeddings, blocks and final norm")
            elif "[i]" not in host["path"]:
                why = "a value of the whole model: the stack's chain draws only its embeddings, norm and head"
            else:
                why = (f"not produced by one forward of the tiny checkpoint under {', '.join(loads) or 'any load'}"
                       + (f" ({needs})" if needs else "") + ": its place in the order is not measured")
            out.append({"row": row, "why": why})
    return out
