"""An encoder-decoder's two stacks: which hosts and blocks are each stack's, its drawing, its sizes.

A model has two stacks when two of its hosts (``model.encoder``, ``model.decoder``) each have blocks of their own
(``model.encoder.layers[i]``); a decoder-only or encoder-only model has none of these and its page is drawn as before.
Everything here is read from the facts:

- each stack's parts are its host's values in the order the host lists them, each under the child module it is read
  at (``the child module conv1's output``), the stack's blocks after its embeddings and before its final norm
  (``final_norm_output``, the standard name of a stack's last norm); the root's values read past the last stack
  (its head, its logits) end the last stack's column;
- the cross-attention's arrow: a checked relation on the cross-attention's host states where ``encoder_states``
  comes from (``encoder_states == model.encoder.stack_output``); the arrow leaves the part that draws that value
  (the encoder's final norm, where a relation on the stack proves its output is the norm's; its blocks where the
  relation names the last block's output, as BART's, whose blocks are post-norm);
- each stack's size: its blocks counted on the full-size checkpoint's list of block kinds, its layouts' sizes
  (width, heads, head size, MLP width) the full-size checkpoint's (the cheat sheet's numbers: the layouts name one
  size per dimension, so both stacks print the model's; tests/test_site_stacks.py holds each stack's against its
  own config.json fields, encoder_attention_heads and decoder_attention_heads apart).

:func:`stacks_diagram` draws the stacks twice, as `generator.site.block_diagram` draws a block: side by side for a
wide page, one under the other for a phone, so no text is scaled under 12 px.
"""

from __future__ import annotations

import re

from generator.site.diagrams import CHAR, LINE, Box, Links
from generator.site.escaping import slug

#: the standard name of the value a stack's final norm produces: drawn after the stack's blocks
FINAL_NORM = "final_norm_output"
#: the sizes a stack's cheat-sheet line gives, in its order: (the layouts' dimension name, what the line calls it)
SIZES = (("hidden_size", "width"), ("num_heads", "heads"), ("num_kv_heads", "key-value heads"),
         ("head_dim", "head size"), ("intermediate_size", "MLP width"))
_READ = re.compile(r"^the child module ([\w.]+)'s (?:input|output)")
_FROM = re.compile(r"^encoder_states == (model\.[\w.\[\]-]+)")
GAP, PAD, HEAD = 26.0, 12.0, 30.0  # px: between a column's parts, inside a part, a column's heading


def _served(v: dict) -> bool:
    return any((v.get("availability") or {"any": True}).values())


def stacks_of(facts: dict) -> list[dict]:
    """Each stack, in the order its host comes: its path, its host's values, the block kinds it runs, its blocks'
    indices in the full-size checkpoint's list, and its sizes. [] for a model of one stack."""
    paths = [h["path"] for h in facts["hosts"]]
    out: list[dict] = []
    for h in facts["hosts"]:
        path = h["path"]
        if path == "model" or h.get("section", "text") == "vision" or f"{path}.layers[i]" not in paths:
            continue
        if any(s["path"] == path for s in out):
            continue
        inside = f"{path}.layers[i]"
        kinds = [k["kind"] for k in facts["stack"].get("block_kinds", [])
                 if any(r.startswith(inside) for r in k.get("sequence") or [])
                 or any((p.get("host") or "").startswith(inside) for p in k.get("parts") or [])]
        blocks = [i for i, b in enumerate(facts["stack"].get("blocks") or []) if b in kinds]
        dims = facts["printout"].get("dims") or {}
        out.append({"path": path, "name": path.rsplit(".", 1)[-1], "host": h, "kinds": kinds, "blocks": blocks,
                    "sizes": [(label, dims[d]) for d, label in SIZES if d in dims]})
    return out if len(out) > 1 else []


def cross_edges(facts: dict) -> list[dict]:
    """Each cross-attention host's source: ``{"host", "row", "source"}``, where a checked relation on the host states
    ``encoder_states == <source>``."""
    out = []
    for r in facts.get("relations") or []:
        m = _FROM.match(r["text"])
        if m and "encoder_states" in r.get("proves", []) and not any(e["host"] == r["host"] for e in out):
            out.append({"host": r["host"], "row": f"{r['host']}.encoder_states", "source": m.group(1)})
    return out


def host_groups(facts: dict, stacks: list[dict], hosts: list[dict]) -> list[tuple[str, dict | None, list[dict]]]:
    """The support tables' groups: the whole model's hosts, then each stack's, then the cross-attention's (the hosts
    a relation states read the encoder's output)."""
    cross = {e["host"] for e in cross_edges(facts)}
    groups: list[tuple[str, dict | None, list[dict]]] = [("text", None, [h for h in hosts if h["path"] == "model"])]
    for s in stacks:
        mine = [h for h in hosts if (h["path"] == s["path"] or h["path"].startswith(s["path"] + "."))
                and h["path"] not in cross]
        groups.append(("stack", {"title": f"the {s['name']} · {s['path']}", "id": f"support-{slug(s['name'])}"}, mine))
    if cross:
        groups.append(("stack", {"title": "the cross-attention · " + ", ".join(sorted(cross)),
                                 "id": "support-cross-attention"}, [h for h in hosts if h["path"] in cross]))
    placed = {id(h) for _, _, g in groups for h in g}
    groups[0][2].extend(h for h in hosts if id(h) not in placed)  # a host of no stack: the whole model's
    return [g for g in groups if g[2]]


def _module_parts(host: dict, scope: str) -> list[tuple[str, list[str]]]:
    """(child module, its served values) in the order the host lists them."""
    parts: dict[str, list[str]] = {}
    for v in host["values"]:
        m = _READ.match(v.get("read_at") or "")
        if m and _served(v):
            parts.setdefault(m.group(1), []).append(v["name"])
    return list(parts.items())


class _Parts:
    """Builds the drawing's boxes (one per child module, the blocks, the cross-attention), each linked to its rows."""

    def __init__(self, links: Links, prefix: str):
        self.links, self.prefix = links, prefix

    def module(self, scope: str, module: str, values: list[str]) -> Box:
        full = f"{scope}.{module}"
        rows = [f"{scope}.{v}" for v in values]
        mod = self.links.module(full)
        linked, lines = self.links.part(mod, next((r for r in rows if r in self.links.rows), ""))
        linked += [r for r in rows if r in self.links.rows and r not in linked]
        lines += [r for r in rows if r in self.links.lines and r not in lines]
        return self._box(module, values, full, mod, next((r for r in rows if r in self.links.rows), ""),
                         linked, lines)

    def blocks(self, scope: str, count: int) -> Box:
        full = f"{scope}.layers"
        mod = self.links.module(full) or (full if f"{full}[i]" in self.links.hosts else "")
        rows, lines = self.links.part(mod, "")
        b = self._box("layers", [f"× {count}"], full, mod, "", rows, lines)
        b.cls, b.count, b.sub = "nc-stack", count, [f"× {count}"]
        return b

    def own(self, row: str) -> Box:
        """A value the root returns as its own output (the logits): its own row."""
        name = row.rsplit(".", 1)[-1]
        return self._box(name, [], row, "", row if row in self.links.rows else "", [row] if row in self.links.rows
                         else [], [row] if row in self.links.lines else [])

    def cross(self, host: str, row: str) -> Box:
        mod = self.links.module(host)
        rows, lines = self.links.part(mod, row)
        return self._box(host.rsplit(".", 1)[-1], [row.rsplit(".", 1)[-1]], host, mod,
                         row if row in self.links.rows else "", rows, lines)

    def _box(self, label, sub, full, module, value_row, rows, lines) -> Box:
        path = full[len("model."):]
        return Box(label, list(sub), w=max(len(label) + 2, *(len(s) for s in sub or [""])) * CHAR + 2 * PAD,
                   h=30 + LINE * len(sub), id=f"{self.prefix}-{slug(path)}", path=path,
                   value=value_row.rsplit(".", 1)[-1] if value_row else "", title=full, module=module,
                   value_row=value_row, rows=rows, lines=lines)


def _columns(facts: dict, stacks: list[dict], edges: list[dict], parts: _Parts) -> tuple[list[dict], list[tuple]]:
    """Each stack's column of parts, top to bottom, and the cross-attention arrows as (source box, target box)."""
    root = next((h for h in facts["hosts"] if h["path"] == "model"), {"values": []})
    columns = []
    for n, s in enumerate(stacks):
        before, after = [], []
        for module, values in _module_parts(s["host"], s["path"]):
            (after if FINAL_NORM in values else before).append(parts.module(s["path"], module, values))
        layers = parts.blocks(s["path"], len(s["blocks"]))
        inner = [parts.cross(e["host"], e["row"]) for e in edges if e["host"].startswith(s["path"] + ".layers[i]")]
        boxes = [*before, layers, *after]
        if n == len(stacks) - 1:  # the root's head and logits read the last stack's output
            boxes += [parts.module("model", m, vs) for m, vs in _module_parts(root, "model")]
            boxes += [parts.own(f"model.{v['name']}") for v in root["values"]
                      if _served(v) and (v.get("read_at") or "").startswith("the module's own output")]
        columns.append({"stack": s, "boxes": boxes, "layers": layers, "inner": inner, "after": after})
    arrows = []
    for e in edges:
        target = next((b for c in columns for b in c["inner"] if b.value_row == e["row"] or b.title == e["host"]), None)
        source = _source(e["source"], columns, facts)
        if target and source:
            arrows.append((source, target))
    return columns, arrows


def _source(path: str, columns: list[dict], facts: dict) -> Box | None:
    """The part that draws ``path``: a value's own part; a stack's output, the part of the value a relation on the
    stack proves it equal to (its final norm's); a block's value, the stack's blocks."""
    for c in columns:
        scope = c["stack"]["path"]
        if path.startswith(scope + ".layers["):
            return c["layers"]
        if not path.startswith(scope + "."):
            continue
        name = path[len(scope) + 1:]
        own = next((b for b in c["boxes"] if f"{scope}.{name}" in b.rows and b.value_row), None)
        if own:
            return own
        for r in facts.get("relations") or []:
            if r["host"] == scope and name in r.get("proves", []):
                equal = next((b for b in c["after"] for other in r["proves"] if other != name
                              and b.value_row == f"{scope}.{other}"), None)
                if equal:
                    return equal
    return None


def stacks_diagram(facts: dict, stacks: list[dict], links: Links, prefix: str = "stacks") -> dict:
    """The stacks' two drawings, ``{"wide": ..., "narrow": ..., "arrows": [(source path, target path)]}``."""
    edges = cross_edges(facts)
    wide = _layout(*_columns(facts, stacks, edges, _Parts(links, prefix)), side_by_side=True)
    narrow = _layout(*_columns(facts, stacks, edges, _Parts(links, f"{prefix}-n")), side_by_side=False)
    return {"wide": wide, "narrow": narrow, "arrows": [(a.path, b.path) for a, b in wide["pairs"]]}


def _layout(columns: list[dict], pairs: list[tuple], side_by_side: bool) -> dict:
    """Each column's parts top to bottom joined by arrows, the columns side by side (or one under the other), and an
    arrow from each cross-attention's source to it (through the gap between the columns, or along their right)."""
    x0, y0, links, headings, boxes = 10.0, 10.0, [], [], []
    for c in columns:
        layers = c["layers"]
        for b in c["inner"]:  # the cross-attention is drawn inside the blocks it runs in
            layers.w = max(layers.w, b.w + 2 * PAD)
        width = max(b.w for b in c["boxes"])
        for b in c["boxes"]:
            b.w = width
        y = y0 + HEAD
        headings.append({"x": x0, "y": y0 + 16, "text": f"{c['stack']['path']} · {len(c['stack']['blocks'])} blocks"})
        for b in c["boxes"]:
            b.x, b.y = x0, y
            if b is layers and c["inner"]:
                iy = b.y + b.h + 2
                for inner in c["inner"]:
                    inner.x, inner.y, inner.w = b.x + PAD, iy, b.w - 2 * PAD
                    iy += inner.h + 8
                b.h = iy - b.y + 4
                b.cls += " nc-group"
            y = b.y + b.h + GAP
        for a, b in zip(c["boxes"], c["boxes"][1:]):
            links.append([(a.x + 24, a.y + a.h), (b.x + 24, b.y)])
        boxes += [p for b in c["boxes"] for p in ([b, *c["inner"]] if b is layers else [b])]
        c["right"], c["bottom"] = x0 + width, y - GAP
        if side_by_side:
            x0 += width + 3 * GAP
        else:
            y0 = y + GAP / 2
    right = max(c["right"] for c in columns)
    cross = []
    for n, (a, b) in enumerate(pairs):
        ay, by = a.y + 17, b.y + 17
        if side_by_side and b.x > a.x + a.w:
            mid = a.x + a.w + 1.5 * GAP - 6 * n
            cross.append([(a.x + a.w, ay), (mid, ay), (mid, by), (b.x, by)])
        else:
            edge = right + 18 + 8 * n
            cross.append([(a.x + a.w, ay), (edge, ay), (edge, by), (b.x + b.w, by)])
    width = max([right] + [x for line in cross for x, _ in line]) + 14
    height = max(c["bottom"] for c in columns) + 12
    return {"width": width, "height": height, "boxes": boxes, "links": links, "cross": cross,
            "headings": headings, "pairs": pairs}


def local_index(blocks: list[str], stacks: list[dict]) -> list[int]:
    """Each block of the full-size list's index within its own stack (the decoder's first block is
    ``decoder.layers[0]``), which the slider writes into a path."""
    out = list(range(len(blocks)))
    for s in stacks:
        for n, i in enumerate(s["blocks"]):
            out[i] = n
    return out


def stacks_context(facts: dict, links: Links, hosts: list[dict]) -> dict | None:
    """What the family page reads for an encoder-decoder (None for a model of one stack): the stacks' drawing (in
    place of the one stack's chain), the support tables' groups, the cheat sheet's groups each headed by its stack's
    sizes, and each block's index within its stack."""
    stacks = stacks_of(facts)
    if not stacks:
        return None
    groups = host_groups(facts, stacks, hosts)
    by_title = {f"the {s['name']} · {s['path']}": s for s in stacks}
    cheat = []
    for _, heading, members in groups:
        s = by_title.get((heading or {}).get("title", ""))
        sizes = [f"{len(s['blocks'])} blocks", *(f"{label} {size:,}" for label, size in s["sizes"])] if s else []
        cheat.append({"title": (heading or {}).get("title", "the whole model · model"), "sizes": sizes,
                      "stack": s["path"] if s else "", "hosts": members})
    drawing = stacks_diagram(facts, stacks, links)
    data = {"local": local_index(facts["stack"].get("blocks") or [], stacks),
            "stacks": [{"path": s["path"], "blocks": len(s["blocks"]), "kinds": s["kinds"]} for s in stacks],
            "cross": [{"from": a.path, "from_value": a.value_row, "to": b.path, "to_value": b.value_row}
                      for a, b in drawing["wide"]["pairs"]]}
    return {"drawing": drawing, "groups": groups, "cheat": cheat, "data": data, "stacks": stacks}
