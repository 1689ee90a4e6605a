"""The family page's diagrams: geometry for its inline SVG and the facts its script needs.

Drawn by site_templates/_svg.html.j2 and made interactive by site_templates/assets/nncanon.js and nncanon-events.js.
Every part carries its standard path (``data-path``); :class:`Links` ties each part to the
support-table rows (``host.value``) and printout lines (their ``data-path``) that name it.

- :func:`chain_diagram` the stack (or the image's path) as a row of boxes joined by arrows;
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


def served_chain(facts: dict) -> list[dict]:
    """The stack's chain without a node whose value the root does not serve under any load: a post-norm stack has no
    final norm (BERT's, BART's blocks each end in their own LayerNorm), and an encoder-decoder's embeddings are its
    stacks' (model.encoder, model.decoder), not the root's. The blocks and the output are always drawn."""
    root = next((h for h in facts["hosts"] if h["path"] == "model"), {"values": []})
    served = {v["name"] for v in root["values"] if any((v.get("availability") or {"any": True}).values())}
    return [node for node in facts["stack"].get("chain", [])
            if node.get("count") is not None or node.get("value") in (None, "", "the output") or node["value"] in served]


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


def diagram_data(facts: dict, lookup: dict, diagrams: list[tuple[str | None, dict]], more: dict | None = None) -> str:
    """The facts the page's script needs, as compact JSON (put in an attribute, so autoescaped).

    ``diagrams`` is each drawn diagram with the block kind it draws (None for the chains and the
    vision block). Per part: its path, label, value row, rows and printout lines; per value row a
    card's text (layout, dims, description, read-at, conditions, the tiny shape). ``more``: an encoder-decoder's
    stacks, its cross-attention's arrows and its blocks' indices within their own stack, which the slider writes in
    paths (`generator.site.stacks.stacks_context`).
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
                # its accessible name, which the page's script sets (in the HTML it repeated the part's own text)
                "aria": b.aria,
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
                    **({"read_line": v["read_line"]} if v.get("read_line") else {}),
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
        **(more or {}),
    }
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
