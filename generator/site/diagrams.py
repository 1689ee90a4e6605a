"""The family page's diagrams: geometry for its inline SVG and the facts its script needs.

Drawn by site_templates/_svg.html.j2 and made interactive by site_templates/assets/nncanon.js and nncanon-events.js.
Every part carries its standard path (``data-path``); :class:`Links` ties each part to the
support-table rows (``host.value``) and printout lines (their ``data-path``) that name it.

- :func:`chain_diagram` the stack (or the image's path) as a row of boxes joined by arrows;
- :func:`block_diagram` one block: the residual stream, each sublayer branching off it;
- :func:`block_strip` one tick per block of the full-size stack, under the block slider;
- :func:`diagram_data` the parts' and values' facts as compact JSON for the page's script.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from generator.site.escaping import slug

CHAR = 7.6  # px per character of the 12.5px monospace the diagrams use
LINE = 16


def _text_width(lines: list[str]) -> float:
    return max((len(s) for s in lines), default=0) * CHAR


def _wrap(text: str, width: int = 24) -> list[str]:
    words, lines, cur = str(text).split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + [cur] if cur else lines


@dataclass
class Links:
    """What a diagram part can point at: support-table rows and printout lines, by their paths."""

    rows: set[str] = field(default_factory=set)  # "model.layers[i].mlp.router_logits"
    hosts: dict[str, list[str]] = field(default_factory=dict)  # host path -> its rows, in order
    lines: set[str] = field(default_factory=set)  # printout paths: "model.layers[i].mlp.router"

    @classmethod
    def of(cls, facts: dict, printout: list[dict]) -> Links:
        hosts: dict[str, list[str]] = {}
        for h in facts["hosts"]:  # a path two host classes share (llama4's dense and MoE mlp): both's values
            rows = hosts.setdefault(h["path"], [])
            rows += [r for r in (f"{h['path']}.{v['name']}" for v in h["values"]) if r not in rows]
        rows = {r for rs in hosts.values() for r in rs}
        return cls(rows, hosts, {r["path"] for r in printout if r["path"]})

    def module(self, path: str) -> str:
        return path if path in self.lines or path in self.hosts else ""

    def part(self, module: str, value_row: str) -> tuple[list[str], list[str]]:
        """(rows, printout lines) of a part: its own value first, then its host's values if it is one."""
        rows = [value_row] if value_row in self.rows else []
        own = self.hosts.get(module) or self.hosts.get(f"{module}[i]", [])  # a ModuleList: its blocks
        rows += [r for r in own if r not in rows]
        lines = [p for p in dict.fromkeys([module, *rows]) if p and p in self.lines]
        return rows, lines


@dataclass
class Box:
    label: str
    sub: list[str] = field(default_factory=list)
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0
    id: str = ""
    path: str = ""
    value: str = ""
    title: str = ""
    cls: str = ""
    children: list[Box] = field(default_factory=list)
    # what the part points at (support rows, printout lines) and what its card says
    module: str = ""
    value_row: str = ""
    rows: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    note: str = ""
    count: int | None = None
    section: str = "text"
    # a value chip's incoming arrows: (the source's path, "flow" a relation ties them | "order" the one before)
    inputs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def aria(self) -> str:
        """The part's accessible name: its label, standard path and value."""
        out = f"{self.label}: {self.path}"
        if self.count is not None:
            out += f" × {self.count}"
        if self.value_row:
            out += f", value {self.value_row.rsplit('.', 1)[-1]}"
        elif self.note:
            out += f", {self.note}"
        if self.inputs:
            # the sources by their path within the block (the chip's own path says which block)
            out += ", arrows from " + ", ".join(p.split("].", 1)[-1] + (" (the value before)" if how == "order" else "")
                                                for p, how in self.inputs)
        return out


def chain_diagram(chain: list[dict], prefix: str, links: Links | None = None, root: str = "model") -> dict:
    """The stack (or the image's path) as a row of boxes joined by arrows.

    With ``links``, each node's module and value are looked up under ``root`` then under the
    model (``patch_embed`` -> ``model.vision.patch_embed``, ``projector`` -> ``model.projector``),
    and the node's standard path is what it resolved to, without the leading ``model.``.
    """
    links = links or Links()
    boxes, x, pad, gap = [], 8.0, 12.0, 34.0
    for node in chain:
        m, value = node["module"], node.get("value") or ""
        sub = []
        if node.get("count") is not None:
            sub.append(f"× {node['count']}")
        if value:
            sub += _wrap(value, 22)
        w = max(_text_width([m]) + 2, _text_width(sub)) + 2 * pad
        scopes = [root] if root == "model" else [root, "model"]
        module = next((links.module(f"{s}.{m}") for s in scopes if links.module(f"{s}.{m}")), "")
        words = [value, m, *re.findall(r"[A-Za-z_]\w*", value)]
        value_row = next((f"{s}.{n}" for n in words for s in scopes if f"{s}.{n}" in links.rows), "")
        own_row = next((f"{s}.{m}" for s in scopes if f"{s}.{m}" in links.rows), "")
        std = module or own_row
        path = std[len("model.") :] if std.startswith("model.") else m
        rows, lines = links.part(module, value_row)
        boxes.append(
            Box(
                m,
                sub,
                x=x,
                w=w,
                h=30 + LINE * len(sub),
                id=f"{prefix}-{slug(path)}",
                path=path,
                value=value,
                title=" → ".join(filter(None, [m, value])),
                cls="nc-stack" if node.get("count") is not None else "",
                module=module,
                value_row=value_row,
                rows=rows,
                lines=lines,
                note=value if value and not value_row.endswith("." + value) else "",
                count=node.get("count"),
                section="text" if root == "model" else "vision",
            )
        )
        x += w + gap
    height = max((b.h for b in boxes), default=30) + 16
    for b in boxes:  # centre the boxes on one axis
        b.y = (height - b.h) / 2
    arrows = [[(a.x + a.w, height / 2), (b.x, height / 2)] for a, b in zip(boxes, boxes[1:])]
    return {"width": x - gap + 8, "height": height, "boxes": boxes, "arrows": arrows}


def _stream_terms(adds: list[list[str]], root: str) -> tuple[list[str], str]:
    """The stream entering the block (its full path under ``root``, which the slider indexes), what
    each add brings, and the stream leaving it."""
    if not adds:
        return [f"{root}.layer_input"], "layer_output"
    return [f"{root}.{adds[0][0]}", *(add[1] for add in adds)], adds[-1][2]


def block_diagram(
    parts: list[dict], adds: list[list[str]], lookup: dict, prefix: str, links: Links | None = None,
    root: str = "layers[i]",
) -> dict:
    """One block: the residual stream along the top, each sublayer branching off it and added back.

    Which parts add into the stream comes from the block's relations that state a residual add
    (``adds``: stream in, what is added, stream out; ``linear_attn.attention_output`` -> the part
    whose path ends in ``.linear_attn``), in the order the stream flows; the parts before each such part (its norm)
    form its branch, and a part whose path extends another's is drawn inside it (as a sibling
    drawn after it, so no focusable part holds another: ``boxes`` is flat, in drawing order).
    """
    links = links or Links()
    ids = [p["id"] for p in parts]
    parent = {}
    for p in parts:
        owners = [q for q in ids if q != p["id"] and p["id"].startswith(q + ".")]
        parent[p["id"]] = max(owners, key=len) if owners else None
    terms, out_name = _stream_terms(adds, root)
    # an add whose fourth element is the block's input stream reads that, not the stream before it: a
    # parallel branch (GPT-NeoX), drawn on a row of its own tapped where the first branch is
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
        return Box(
            label,
            sub,
            w=max(_text_width([label]) + 2, _text_width(sub)) + 24,
            h=30 + LINE * len(sub),
            id=f"{prefix}-{slug(p['id'])}",
            path=p["id"],
            value=value,
            title=title,
            module=module,
            value_row=value_row if value_row in links.rows else "",
            rows=rows,
            lines=lines,
            section="vision" if p["id"].startswith("vision.") else "text",
        )

    top, kids = [], {}
    for p in parts:
        (kids.setdefault(parent[p["id"]], []) if parent[p["id"]] else top).append(p)

    def build(p: dict) -> Box:
        b = box_for(p)
        children = [build(c) for c in kids.get(p["id"], [])]
        if children:
            b.cls = "nc-group"
            inner_w = max(c.w for c in children)
            b.w = max(b.w, inner_w + 24)
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

    stream_y, row_y, gap, margin = 46.0, 96.0, 36.0, 20.0
    x = margin + max(len(terms[0]) * CHAR * 0.5, 40)
    drawn, links_, adds, taps = [], [], [], []
    edges: list[tuple] = []  # the arrows between parts, (path, value row) -> (path, value row): checked on order
    previous = None
    for n, branch in enumerate(branches):
        boxes = [build(p) for p in branch]
        if n < len(parallel) and parallel[n]:
            y, tap = max((b.y + b.h for b in drawn), default=row_y) + 24, taps[0]
        else:
            y, tap = row_y, x
            taps.append(x)
        # a part the YAML marks parallel reads what the part before it reads: drawn under it, fed alike
        cols: list[list[Box]] = []
        for b, p in zip(boxes, branch):
            (cols[-1].append(b) if p.get("parallel") and cols else cols.append([b]))
        bx = x + 18
        for col in cols:
            cy = y
            for b in col:
                b.x, b.y = bx, cy
                cy += b.h + 12
            bx += max(b.w for b in col) + gap
        mid = y + 17
        for b in cols[0]:
            links_.append([(tap, stream_y), (tap, b.y + 17), (b.x, b.y + 17)])  # tap down, then into the box
        if previous is not None and not (n < len(parallel) and parallel[n]):  # the stream carries one into the next
            edges += [((a.path, a.value_row), (b.path, b.value_row)) for a in previous for b in cols[0]]
        for before, col in zip(cols, cols[1:]):
            a = before[0]
            turn = a.x + a.w + gap / 2
            for b in col:
                links_.append([(a.x + a.w, mid), (turn, mid), (turn, b.y + 17), (b.x, b.y + 17)])
            edges += [((a.path, a.value_row), (b.path, b.value_row)) for a in before for b in col]
        last = max(cols[-1], key=lambda b: b.x + b.w)
        if any(adds_to_stream(p["id"]) for p in branch[-len(cols[-1]):]):
            ax = last.x + last.w + 22
            for b in cols[-1]:
                links_.append([(b.x + b.w, b.y + 17), (ax, b.y + 17), (ax, stream_y + 10)])
            adds.append(ax)
            x = ax + 40
        else:
            x = last.x + last.w + 40
        previous = cols[-1]
        drawn += [f for b in boxes for f in flatten(b)]
    width = x - 24 + len(out_name) * CHAR + margin  # the output's label clears the last add
    height = max((b.y + b.h for b in drawn), default=row_y) + 16
    return {
        "width": width,
        "height": height,
        "stream_y": stream_y,
        "boxes": drawn,
        "links": links_,
        "adds": adds,
        "taps": taps,
        "input": terms[0],
        "output": out_name,
        "edges": edges,
    }


def block_strip(blocks: list[str], kinds: list[str], marked: list[dict] = ()) -> dict:
    """One tick per block of the full-size stack, its color its kind (``k``: its kind's index).

    A tick of a ``marked`` block (qwen3_vl's DeepStack blocks) carries its mark's label.
    The ticks sit under the block slider (an ``input type=range``), each at its value's place:
    the stylesheet puts tick ``i`` of ``n`` at ``i / (n - 1)`` of the track the thumb travels.
    """
    ticks = [
        {"i": i, "kind": k, "k": kinds.index(k) if k in kinds else len(kinds),
         "mark": next((m["label"] for m in marked if i in m["blocks"]), "")} for i, k in enumerate(blocks)
    ]
    return {"n": len(blocks), "last": max(len(blocks) - 1, 0), "ticks": ticks}


def _measured_text(v: dict) -> str:
    m = v.get("measured")
    if m is None:
        return "not on the tiny checkpoint"
    if m.get("shape") is not None:
        return f"tiny [{', '.join(str(s) for s in m['shape'])}] {m.get('dtype', '')}".rstrip()
    return f"tiny: {m['value'] if m.get('value') is not None else m.get('dtype', '')}"


def diagram_data(facts: dict, lookup: dict, diagrams: list[tuple[str | None, dict]]) -> str:
    """The facts the page's script needs, as compact JSON (put in an attribute, so autoescaped).

    ``diagrams`` is each drawn diagram with the block kind it draws (None for the chains and the
    vision block). Per part: its path, label, value row, rows and printout lines; per value row a
    card's text (layout, dims, description, read-at, conditions, the tiny shape).
    """
    parts, values = {}, {}
    for kind, d in diagrams:
        for b in d["boxes"]:
            parts[b.id] = {
                "path": b.path,
                "label": b.label,
                "kind": kind,
                "section": b.section,
                "module": b.module,
                "value": b.value_row,
                "rows": b.rows,
                "lines": b.lines,
                "note": b.note,
                "count": b.count,
                **({"from": [list(i) for i in b.inputs]} if b.inputs else {}),
            }
            host, _, name = b.value_row.rpartition(".")
            v = lookup.get((host, name))
            if v and b.value_row not in values:
                values[b.value_row] = {
                    "name": v["name"],
                    "layout": v["layout"],
                    "dims": v.get("dims") or [],
                    "description": v["description"],
                    "read_at": v["read_at"],
                    "conditions": [
                        {"needs": c.get("needs", ""), "why": c.get("why") or ""} for c in v.get("conditions") or []
                    ],
                    "measured": _measured_text(v),
                    "writable": v.get("writable", True) is not False,
                }
    stack = facts["stack"]
    kinds = stack.get("block_kinds", [])
    data = {
        "family": facts["family"],
        "blocks": stack.get("blocks") or [],
        "kinds": [
            {"kind": k["kind"], "label": k.get("label") or k["kind"], "n": n}
            for n, k in enumerate(kinds)
        ],
        "parts": parts,
        "values": values,
    }
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
