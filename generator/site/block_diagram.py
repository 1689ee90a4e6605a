"""One block's diagram: the residual stream, each sublayer branching off it and added back.

A block is drawn twice from the same facts (site_templates/_svg.html.j2 shows one, by the width its box has):
``wide`` lays each sublayer's parts left to right and wraps the stream onto a new row when a row would pass
``WIDE`` px (gemma2's sandwich norms would not fit a 1280 px window in one row at a readable size); ``narrow``
stacks each sublayer's parts top to bottom, one sublayer per row, for a phone. Both draw the text at its
size (never scaled under 12 px), so a reader sees the same labels on every screen.
"""

from __future__ import annotations

from generator.site.diagrams import CHAR, LINE, Box, Links, _text_width
from generator.site.escaping import slug

#: the widest a row of the wide drawing gets: the content column of a 1280 px window with both sidebars (≈ 750 px)
#: at full size, so its 12.5 px text is never scaled below 12 px
WIDE = 720.0
#: the narrow drawing's rows: a phone's content column (375 px window, 16 px margins) at full size
NARROW = 340.0
#: a stream row's top to its boxes, the gap between a part and the next, the page margin
STREAM_TO_BOXES, GAP, MARGIN = 50.0, 36.0, 20.0


def _stream_terms(adds: list[list[str]], root: str) -> tuple[list[str], str]:
    """The stream entering the block (its full path under ``root``, which the slider indexes), what
    each add brings, and the stream leaving it."""
    if not adds:
        return [f"{root}.layer_input"], "layer_output"
    return [f"{root}.{adds[0][0]}", *(add[1] for add in adds)], adds[-1][2]


class _Drawing:
    """The geometry one layout accumulates: boxes, arrows, the stream's taps and adds, in page coordinates."""

    def __init__(self):
        self.boxes: list[Box] = []
        self.links: list[list[tuple[float, float]]] = []
        self.adds: list[tuple[float, float]] = []
        self.taps: list[tuple[float, float]] = []

    def mark(self) -> tuple[int, int, int, int]:
        return len(self.boxes), len(self.links), len(self.adds), len(self.taps)

    def shift(self, since: tuple[int, int, int, int], dx: float, dy: float) -> None:
        """Move what was drawn since ``mark()`` by (dx, dy): a sublayer that moves to the next row."""
        b0, l0, a0, t0 = since
        for b in self.boxes[b0:]:
            b.x, b.y = b.x + dx, b.y + dy
        self.links[l0:] = [[(x + dx, y + dy) for x, y in link] for link in self.links[l0:]]
        self.adds[a0:] = [(x + dx, y + dy) for x, y in self.adds[a0:]]
        self.taps[t0:] = [(x + dx, y + dy) for x, y in self.taps[t0:]]

    def right(self, since: tuple[int, int, int, int]) -> float:
        b0, _, a0, _ = since
        return max([b.x + b.w for b in self.boxes[b0:]] + [x for x, _ in self.adds[a0:]], default=0.0)


def block_diagram(
    parts: list[dict], adds: list[list[str]], lookup: dict, prefix: str, links: Links | None = None,
    root: str | None = None,
) -> dict:
    """The block's two drawings, ``{"wide": ..., "narrow": ..., "edges": ...}`` (see the module's docstring).

    Which parts add into the stream comes from the block's relations that state a residual add
    (``adds``: stream in, what is added, stream out; ``linear_attn.attention_output`` -> the part
    whose path ends in ``.linear_attn``), in the order the stream flows; the parts before each such part (its norm)
    form its branch, and a part whose path extends another's is drawn inside it (as a sibling
    drawn after it, so no focusable part holds another: ``boxes`` is flat, in drawing order).
    ``edges`` (every arrow between parts, as (path, value row) pairs, the same in both drawings) is what
    `generator.site.interiors.check_order` checks against the measured order. ``root``: the blocks' path, by default
    the one the parts are under (an encoder-decoder's ``encoder.layers[i]``), else ``layers[i]``.
    """
    root = root or next((p["id"].split("layers[i]", 1)[0] + "layers[i]" for p in parts if "layers[i]" in p["id"]),
                        "layers[i]")
    wide = _layout(parts, adds, lookup, prefix, links or Links(), root, vertical=False, limit=WIDE)
    narrow = _layout(parts, adds, lookup, f"{prefix}-n", links or Links(), root, vertical=True, limit=NARROW)
    return {"wide": wide, "narrow": narrow, "edges": wide["edges"]}


def _layout(parts, adds, lookup, prefix, links, root, vertical: bool, limit: float) -> dict:
    ids = [p["id"] for p in parts]
    parent = {}
    for p in parts:
        owners = [q for q in ids if q != p["id"] and p["id"].startswith(q + ".")]
        parent[p["id"]] = max(owners, key=len) if owners else None
    terms, out_name = _stream_terms(adds, root)
    # an add whose fourth element is the block's input stream reads that, not the stream before it: a
    # parallel branch (GPT-NeoX), drawn under the first branch and tapped where it is
    parallel = [i > 0 and len(add) > 3 and add[3] == adds[0][0] for i, add in enumerate(adds)]
    # what an add brings names a module (``mlp.mlp_output``: the part at ``mlp``) or a value drawn at a part
    adders = {t.rsplit(".", 1)[0] for t in terms[1:] if "." in t}
    added_values = {t for t in terms[1:] if "." not in t}
    by_id = {p["id"]: p for p in parts}

    def adds_to_stream(pid: str) -> bool:
        return any(pid == a or pid.endswith("." + a) for a in adders) or by_id[pid].get("value") in added_values

    def box_for(p: dict) -> Box:
        value = p.get("value") or ""
        host = p.get("host") or ""
        v = lookup.get((host, value))
        title = f"{p['id']}"
        if value:
            title += f" → {host}.{value}"
        if v:
            dims = " ".join(v.get("dims") or [])
            title += f"\n{v['layout']} [{dims}]: {v['description']}"
        sub = [value] if value else []
        label = p.get("label") or p["id"].rsplit(".", 1)[-1]
        module = links.module(f"model.{p['id']}") or f"model.{p['id']}"
        value_row = f"{host}.{value}" if value else ""
        rows, lines = links.part(module, value_row)
        return Box(label, sub, w=max(_text_width([label]) + 2, _text_width(sub)) + 24, h=30 + LINE * len(sub),
                   id=f"{prefix}-{slug(p['id'])}", path=p["id"], value=value, title=title, module=module,
                   value_row=value_row if value_row in links.rows else "", rows=rows, lines=lines,
                   section="vision" if p["id"].startswith("vision.") else "text")

    top, kids = [], {}
    for p in parts:
        (kids.setdefault(parent[p["id"]], []) if parent[p["id"]] else top).append(p)

    def build(p: dict) -> Box:
        b = box_for(p)
        children = [build(c) for c in kids.get(p["id"], [])]
        if children:
            b.cls = "nc-group"
            b.w = max(b.w, max(c.w for c in children) + 24)
            y = b.h + 2
            for c in children:
                c.w = b.w - 24
                c.x, c.y = 12, y
                y += c.h + 8
            b.h = y + 4
            b.children = children
        return b

    def flatten(b: Box) -> list[Box]:
        out = [b]
        for c in b.children:
            c.x, c.y = b.x + c.x, b.y + c.y
            out += flatten(c)
        b.children = []
        return out

    branches, cur = [], []
    for p in top:
        if p.get("parallel") and not cur and branches:  # beside the part that ended the last branch
            branches[-1].append(p)
            continue
        cur.append(p)
        if adds_to_stream(p["id"]):
            branches.append(cur)
            cur = []
    if cur:
        branches.append(cur)

    d = _Drawing()
    edges: list[tuple] = []  # the arrows between parts, (path, value row) -> (path, value row): checked on order
    # the first tap is at once: the input's label sits above the stream, clear of it
    start = MARGIN + (4 if vertical else 12)
    rows = [{"y": 46.0, "start": MARGIN, "units": 0}]  # each row of the stream: its y, where it starts and ends
    x, previous = start, None
    unit, unit_x = d.mark(), x  # what the current sublayer and its parallel branches drew: they move together
    for n, branch in enumerate(branches):
        is_parallel = n < len(parallel) and parallel[n]
        if n and not is_parallel:
            x = _wrap_unit(d, unit, unit_x, x, limit, rows, vertical)
            unit, unit_x = d.mark(), x
        sy = rows[-1]["y"]
        boxes = [build(p) for p in branch]
        if is_parallel:  # under the sublayer it runs beside, tapped where that one is
            y = max((b.y + b.h for b in d.boxes[unit[0]:]), default=sy + STREAM_TO_BOXES) + 24
            tap, x = d.taps[unit[3]][0], unit_x
        else:
            y, tap = sy + STREAM_TO_BOXES, x
            d.taps.append((x, sy))
        # a part the YAML marks parallel reads what the part before it reads: drawn under it, fed alike
        cols: list[list[Box]] = []
        for b, p in zip(boxes, branch):
            (cols[-1].append(b) if p.get("parallel") and cols else cols.append([b]))
        bx, cy = x + (14 if vertical else 18), y
        for col in cols:
            for b in col:
                b.x, b.y = bx, cy
                cy += b.h + 12
            if not vertical:
                bx, cy = bx + max(b.w for b in col) + GAP, y
        for b in cols[0]:
            d.links.append([(tap, sy), (tap, b.y + 17), (b.x, b.y + 17)])  # tap down, then into the box
        if previous is not None and not is_parallel:  # the stream carries one into the next
            edges += [((a.path, a.value_row), (b.path, b.value_row)) for a in previous for b in cols[0]]
        right = max(b.x + b.w for b in boxes)
        for before, col in zip(cols, cols[1:]):
            a = before[0]
            for i, b in enumerate(col):
                if vertical and i == 0:  # straight down from the part above
                    above = before[-1]
                    d.links.append([(b.x + 16, above.y + above.h), (b.x + 16, b.y)])
                elif vertical:  # a parallel part under another: along the right side
                    d.links.append([(a.x + a.w, a.y + 17), (right + 10, a.y + 17), (right + 10, b.y + 17),
                                    (b.x + b.w, b.y + 17)])
                else:
                    turn = a.x + a.w + GAP / 2
                    d.links.append([(a.x + a.w, a.y + 17), (turn, a.y + 17), (turn, b.y + 17), (b.x, b.y + 17)])
            edges += [((a.path, a.value_row), (b.path, b.value_row)) for a in before for b in col]
        last = max(cols[-1], key=lambda b: b.x + b.w)
        if any(adds_to_stream(p["id"]) for p in branch[-len(cols[-1]):]):
            ax = (right if vertical else last.x + last.w) + (14 if vertical else 22)
            if is_parallel:  # its own add on the stream, after the first branch's
                ax = max([ax] + [px + 30 for px, _ in d.adds[unit[2]:]])
            for b in cols[-1]:
                d.links.append([(b.x + b.w, b.y + 17), (ax, b.y + 17), (ax, sy + 10)])
            d.adds.append((ax, sy))
            x = ax + 40
        else:
            x = right + 40
        previous = cols[-1]
        d.boxes += [f for b in boxes for f in flatten(b)]
    if branches:
        x = _wrap_unit(d, unit, unit_x, x, limit, rows, vertical)
    # the stream ends just past the last add, the output's label above it, right-aligned (clear of the input's
    # label on a one-row drawing)
    rows[-1]["end"] = max(x - (26 if vertical else 12),
                          MARGIN + (len(terms[0]) + len(out_name) + 3) * CHAR if len(rows) == 1 else 0)
    width = max(r["end"] for r in rows) + (8 if vertical else MARGIN)
    height = max((b.y + b.h for b in d.boxes), default=rows[-1]["y"] + STREAM_TO_BOXES) + 16
    return {
        "width": width, "height": height, "boxes": d.boxes, "links": d.links, "adds": d.adds, "taps": d.taps,
        "stream": _stream(rows), "input": terms[0], "input_at": (MARGIN, rows[0]["y"] - 12), "output": out_name,
        "output_at": (rows[-1]["end"], rows[-1]["y"] - 14), "rows": len(rows), "edges": edges,
    }


def _wrap_unit(d: _Drawing, unit, unit_x: float, x: float, limit: float, rows: list[dict], vertical: bool) -> float:
    """Place the sublayer just drawn (since ``unit``, from ``unit_x`` to ``x``): it stays on its row when it is the
    row's first or still fits ``limit``; else it moves to a new row under everything drawn so far, and the stream
    turns down to it (a narrow drawing gives each sublayer a row). Returns where the next sublayer starts."""
    row = rows[-1]
    row["units"] += 1
    if row["units"] == 1 or (not vertical and d.right(unit) + 40 <= limit):
        return x
    bottom = max(b.y + b.h for b in d.boxes[:unit[0]])
    row["end"] = unit_x - (26 if vertical else 12)
    rows.append({"y": bottom + 46, "start": MARGIN, "turn": bottom + 16, "units": 1})
    dx = MARGIN + (4 if vertical else 12) - unit_x
    d.shift(unit, dx, rows[-1]["y"] - row["y"])
    return x + dx


def _stream(rows: list[dict]) -> list[tuple[float, float]]:
    """The residual stream as one polyline: along each row, then down past the row's parts and back to the
    left margin to start the next."""
    points = [(rows[0]["start"], rows[0]["y"])]
    for row, nxt in zip(rows, rows[1:]):
        points += [(row["end"], row["y"]), (row["end"], nxt["turn"]), (nxt["start"], nxt["turn"]),
                   (nxt["start"], nxt["y"])]
    points.append((rows[-1]["end"], rows[-1]["y"]))
    return points
