"""Facts JSON -> the encyclopedia's mkdocs docs tree, and the strict mkdocs build of it.

The renderer's only input is the facts JSON that ``generator/collect.py`` writes (one file per
family, schema 1). It never imports torch, transformers or nnsight: re-rendering from cached
facts takes seconds. Every text that comes from facts is escaped: HTML parts by jinja2's
autoescape, markdown parts (notes, SAE text) by :func:`escape_markdown`, which leaves code blocks
and code spans alone and neutralizes raw HTML, attribute lists and script links elsewhere.

Public functions:

- :func:`render_family` facts -> the family page (markdown with inline HTML);
- :func:`render_site` a facts directory -> a full docs tree (hand-written pages from
  ``docs_src/``, one page per family, the families index, the published facts, ``llms.txt``);
- :func:`mkdocs_build` a docs tree -> the static site, ``mkdocs build --strict``.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from markupsafe import Markup

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "site_templates"
DOCS_SRC = ROOT / "docs_src"
MKDOCS_YML = ROOT / "mkdocs.yml"
SCHEMA = 1
# render_site only clears an output directory that it made (that holds this marker) or an empty one.
MARKER = ".nncanon-docs"

REQUIRED = {
    "schema": int,
    "family": str,
    "module": str,
    "lines": list,
    "tagline": str,
    "tags": list,
    "docstring": str,
    "versions": dict,
    "tiny": dict,
    "stack": dict,
    "hosts": list,
    "printout": dict,
    "configs": list,
    "notes": list,
    "identities": list,
}


class FactsError(ValueError):
    """A facts file that the renderer cannot render: says which file, which field, and what to do."""


# ---------------------------------------------------------------- escaping

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_BAD_LINK = re.compile(r"\]\(\s*(?:javascript|vbscript|data):", re.I)
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|])")


def _escape_html_text(text: str) -> str:
    # quotes stay: outside attributes they are plain text, and the toc would show &#39; literally
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_prose(text: str) -> str:
    """Markdown prose outside code: no raw HTML, no attribute lists, no script links."""
    text = _escape_html_text(text)
    text = text.replace("{", "\\{").replace("}", "\\}")
    return _BAD_LINK.sub("](#", text)


def escape_markdown(md: str) -> str:
    """Escape facts markdown so that it renders as markdown but cannot inject HTML.

    Fenced code blocks and code spans are kept verbatim (markdown escapes them itself); a
    fence's info string is cut to a bare language name so it cannot carry attributes.
    """
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if prose:
            text = "\n".join(prose)
            parts, last = [], 0
            for m in _CODE_SPAN.finditer(text):
                parts.append(_escape_prose(text[last : m.start()]))
                parts.append(m.group(0))
                last = m.end()
            parts.append(_escape_prose(text[last:]))
            out.append("".join(parts))
            prose.clear()

    for line in md.splitlines():
        m = _FENCE.match(line)
        if fence is None and m:
            flush()
            fence = m.group(2)
            lang = re.match(r"[\w+-]*", m.group(3).strip()).group(0)
            out.append(f"{m.group(1)}{fence}{lang}")
        elif fence is not None:
            out.append(line)
            if m and m.group(2).startswith(fence) and not m.group(3).strip():
                fence = None
        else:
            prose.append(line)
    flush()
    if fence is not None:
        out.append(fence)  # close an unterminated fence rather than swallow the page
    return "\n".join(out)


def escape_markdown_inline(text: str) -> str:
    """One line of facts text in a markdown context (a heading, a table cell): literal."""
    return _MD_SPECIAL.sub(r"\\\1", _escape_html_text(" ".join(str(text).split())))


def slug(text: str) -> str:
    """An id fragment from any text: lower case, [a-z0-9_-] only."""
    s = re.sub(r"[^a-z0-9_]+", "-", str(text).lower()).strip("-")
    return s or "x"


def show(value) -> str:
    """A config value the way Python prints it (strings bare, as the spec's tables show them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def fmt_error(err) -> str:
    if err is None:
        return "not measured"
    err = float(err)
    return "0 (exact)" if err == 0 else f"{err:.1e}"


# ---------------------------------------------------------------- diagrams
#
# Geometry for the family page's inline SVG (drawn by site_templates/_svg.html.j2) and the facts
# the page's script needs to make it interactive (site_templates/assets/nncanon.js). Every part
# carries its standard path (``data-path``); :class:`Links` ties each part to the support-table
# rows (``host.value``) and printout lines (their ``data-path``) that name it.

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
        hosts = {h["path"]: [f"{h['path']}.{v['name']}" for v in h["values"]] for h in facts["hosts"]}
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


def _identity_terms(identity: str) -> tuple[list[str], str]:
    lhs, _, rhs = identity.partition("==")
    return [t.strip() for t in lhs.split("+")], rhs.strip()


def block_diagram(
    parts: list[dict], identity: str, lookup: dict, prefix: str, links: Links | None = None
) -> dict:
    """One block: the residual stream along the top, each sublayer branching off it and added back.

    Which parts add into the stream comes from the identity's terms (``linear_attn.attention_output``
    -> the part whose path ends in ``.linear_attn``); the parts before each such part (its norm)
    form its branch, and a part whose path extends another's is drawn inside it (as a sibling
    drawn after it, so no focusable part holds another: ``boxes`` is flat, in drawing order).
    """
    links = links or Links()
    ids = [p["id"] for p in parts]
    parent = {}
    for p in parts:
        owners = [q for q in ids if q != p["id"] and p["id"].startswith(q + ".")]
        parent[p["id"]] = max(owners, key=len) if owners else None
    terms, out_name = _identity_terms(identity)
    adders = {t.rsplit(".", 1)[0] for t in terms[1:] if "." in t}

    def adds_to_stream(pid: str) -> bool:
        return any(pid == a or pid.endswith("." + a) for a in adders)

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
        cur.append(p)
        if adds_to_stream(p["id"]):
            branches.append(cur)
            cur = []
    if cur:
        branches.append(cur)

    stream_y, row_y, gap, margin = 46.0, 96.0, 36.0, 20.0
    x = margin + max(len(terms[0]) * CHAR * 0.5, 40)
    drawn, links_, adds, taps = [], [], [], []
    for branch in branches:
        boxes = [build(p) for p in branch]
        taps.append(x)
        bx = x + 18
        for b in boxes:
            b.x, b.y = bx, row_y
            bx += b.w + gap
        mid = row_y + 17
        links_.append([(x, stream_y), (x, mid), (boxes[0].x, mid)])  # tap down, then into the first box
        for a, b in zip(boxes, boxes[1:]):
            links_.append([(a.x + a.w, mid), (b.x, mid)])
        last = boxes[-1]
        if adds_to_stream(branch[-1]["id"]):
            ax = last.x + last.w + 22
            links_.append([(last.x + last.w, mid), (ax, mid), (ax, stream_y + 10)])
            adds.append(ax)
            x = ax + 40
        else:
            x = last.x + last.w + 40
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
    }


def block_strip(blocks: list[str], kinds: list[str]) -> dict:
    """One tick per block of the full-size stack, its color its kind (``k``: its kind's index).

    The ticks sit under the block slider (an ``input type=range``), each at its value's place:
    the stylesheet puts tick ``i`` of ``n`` at ``i / (n - 1)`` of the track the thumb travels.
    """
    ticks = [
        {"i": i, "kind": k, "k": kinds.index(k) if k in kinds else len(kinds)} for i, k in enumerate(blocks)
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
            {"kind": k["kind"], "label": k.get("label") or k["kind"], "identity": k["identity"], "n": n}
            for n, k in enumerate(kinds)
        ],
        "parts": parts,
        "values": values,
    }
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def ranges(indices: list[int]) -> str:
    """[0, 1, 2, 4, 5, 6, 8] -> "0–2, 4–6, 8"."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


# ---------------------------------------------------------------- printout

_PRINT_LINE = re.compile(r"^(\s*)\(([^)]+)\)(:| ->)(.*)$")


def printout_lines(text: str) -> list[dict]:
    """Each line of print(model), with the standard path of the module or value it names.

    Indices of a ModuleList (``(0-2): 3 x ...``) become ``[i]`` so a line's path is the support
    table's host path (``model.layers[i].mlp``); the indices it covers are kept in ``layers``.
    """
    rows, stack = [], []
    for n, line in enumerate(text.splitlines()):
        indent = len(line) - len(line.lstrip(" "))
        row = {"text": line, "path": None, "kind": None, "layers": None}
        m = _PRINT_LINE.match(line)
        if n == 0 and not m:
            stack = [(indent, "model")]
            row.update(path="model", kind="module")
        elif m:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1] if stack else "model"
            key, sep, rest = m.group(2), m.group(3), m.group(4)
            if re.fullmatch(r"\d+(-\d+)?", key):
                path = f"{parent}[i]"
                row["layers"] = key
            else:
                path = f"{parent}.{key.split('/')[0]}"
            is_value = sep == " ->" or rest.lstrip().startswith("[")
            row.update(path=path, kind="value" if is_value else "module")
            if not is_value and rest.rstrip().endswith("("):
                stack.append((indent, path))
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the page


def _check(facts: dict, where: str) -> None:
    for key, typ in REQUIRED.items():
        if key not in facts:
            raise FactsError(
                f"{where}: field {key!r} is missing; re-run `python -m generator build` "
                f"to regenerate the facts"
            )
        if not isinstance(facts[key], typ):
            raise FactsError(
                f"{where}: field {key!r} is a {type(facts[key]).__name__}, expected {typ.__name__}"
            )
    if facts["schema"] != SCHEMA:
        raise FactsError(
            f"{where}: schema {facts['schema']}, this renderer reads schema {SCHEMA}; "
            f"re-run `python -m generator build`"
        )
    for h in facts["hosts"]:
        for v in h.get("values", []):
            for k in ("name", "layout", "description", "read_at"):
                if k not in v:
                    raise FactsError(f"{where}: host {h.get('path')!r} value {v.get('name')!r} has no {k!r}")


def mlp_kind(facts: dict) -> str:
    names = {v["name"] for h in facts["hosts"] if h.get("section", "text") == "text" for v in h["values"]}
    if "router_logits" in names:
        return (
            "mixture of experts + shared expert" if "shared_expert_output" in names else "mixture of experts"
        )
    return "dense" if "mlp_output" in names else "none"


def block_kind_summary(facts: dict) -> list[dict]:
    blocks = facts["stack"].get("blocks") or []
    out = []
    for k in facts["stack"].get("block_kinds", []):
        idx = [i for i, b in enumerate(blocks) if b == k["kind"]]
        out.append(
            {"kind": k["kind"], "label": k.get("label") or k["kind"], "count": len(idx), "where": ranges(idx)}
        )
    return out


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=lambda name: name is None or not name.endswith(".txt.j2"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        md=lambda s: Markup(escape_markdown(s or "")),
        mdi=lambda s: Markup(escape_markdown_inline(s)),
        slug=slug,
        show=show,
        err=fmt_error,
        num=lambda v: f"{v:.1f}".rstrip("0").rstrip("."),
    )
    return env


_ENV: jinja2.Environment | None = None


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV


def normalize(facts: dict) -> dict:
    """A copy of facts with the schema's optional fields filled in, so the template never guesses."""
    f = copy.deepcopy(facts)
    for key, default in (("vision", None), ("vision_configs", []), ("vision_notes", None), ("saes", None)):
        f.setdefault(key, default)
    for h in f["hosts"]:
        h.setdefault("class", "")
        for v in h["values"]:
            for key, default in (
                ("dims", []),
                ("conditions", []),
                ("availability", {}),
                ("measured", None),
                ("writable", True),
            ):
                v.setdefault(key, default)
    notes = list(f["notes"])
    if f["vision_notes"]:
        for part in ("shared", "family"):
            f["vision_notes"].setdefault(part, None)
            if f["vision_notes"][part]:
                notes += f["vision_notes"][part].setdefault("notes", [])
    for n in notes:
        n.setdefault("slug", slug(n["title"]))
    for k in f["stack"].get("block_kinds", []):
        k.setdefault("label", k["kind"])
        k.setdefault("mixer", "")
        k.setdefault("identity_error", None)
    if f["vision"]:
        for key, default in (("facts", []), ("identity_error", None), ("line", ""), ("num_layers", None)):
            f["vision"].setdefault(key, default)
    for c in f["configs"] + f["vision_configs"]:
        for key in ("also", "accessors", "raw"):
            c.setdefault(key, [])
    if f["saes"]:
        for key, default in (("markdown", ""), ("releases", []), ("verified", "")):
            f["saes"].setdefault(key, default)
    return f


def page_context(facts: dict) -> dict:
    facts = normalize(facts)
    lookup = {(h["path"], v["name"]): v for h in facts["hosts"] for v in h["values"]}
    kinds = facts["stack"].get("block_kinds", [])
    kind_names = [k["kind"] for k in kinds]
    summary = {s["kind"]: s for s in block_kind_summary(facts)}
    printout = printout_lines(facts["printout"].get("text", ""))
    links = Links.of(facts, printout)
    blocks = [
        {
            "kind": k,
            "summary": summary[k["kind"]],
            "n": n,
            "diagram": block_diagram(
                k.get("parts", []), k["identity"], lookup, f"part-{slug(k['kind'])}", links
            ),
        }
        for n, k in enumerate(kinds)
    ]
    vision = facts.get("vision")
    vision_ctx = None
    if vision:
        vision_ctx = {
            "chain": chain_diagram(vision.get("chain", []), "vchain", links, "model.vision"),
            "block": block_diagram(vision.get("parts", []), vision["identity"], lookup, "part-vision", links)
            if vision.get("parts")
            else None,
        }
    hosts = [h for h in facts["hosts"] if h.get("section", "text") != "vision"]
    vhosts = [h for h in facts["hosts"] if h.get("section", "text") == "vision"]
    chain = chain_diagram(facts["stack"].get("chain", []), "chain", links)
    drawn = [(None, chain)] + [(b["kind"]["kind"], b["diagram"]) for b in blocks]
    if vision_ctx:
        drawn += [(None, d) for d in (vision_ctx["chain"], vision_ctx["block"]) if d]
    return {
        "f": facts,
        "source": facts["module"].replace(".", "/") + ".py",
        "chain": chain,
        "strip": block_strip(facts["stack"].get("blocks") or [], kind_names),
        "blocks": blocks,
        "vision": vision_ctx,
        "host_groups": [g for g in (("text", None, hosts), ("vision", vision, vhosts)) if g[2]],
        "printout": printout,
        "diagram_json": diagram_data(facts, lookup, drawn),
        "docstring": [p.strip() for p in re.split(r"\n\s*\n", facts["docstring"].strip()) if p.strip()],
    }


def render_family(facts: dict) -> str:
    """The family page: mkdocs markdown with inline HTML, sections in the reference page's order."""
    _check(facts, f"facts of {facts.get('family', '?')}")
    return _env().get_template("family.md.j2").render(**page_context(facts))


# ---------------------------------------------------------------- the site


def _dump(obj) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def load_facts(facts_dir: Path) -> list[dict]:
    """Every family's facts in facts_dir (index.json aside), sorted by family, checked."""
    files = sorted(p for p in Path(facts_dir).glob("*.json") if p.name != "index.json")
    if not files:
        raise FactsError(f"{facts_dir}: no <family>.json facts files; run `python -m generator build` first")
    out = []
    for p in files:
        try:
            facts = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise FactsError(
                f"{p}: not valid JSON ({e}); delete it and re-run `python -m generator build`"
            ) from e
        _check(facts, str(p))
        if facts["family"] != p.stem:
            raise FactsError(f"{p}: field 'family' is {facts['family']!r} but the file is named {p.name}")
        out.append(facts)
    return out


def trait_list(facts: dict) -> list[str]:
    """The traits the families index filters by: block kinds, MLP kind, norm gain, attention quirks, vision."""
    traits = facts.get("traits") or {}
    kinds = {k["kind"]: k["label"] for k in facts["stack"]["block_kinds"]}
    out = [kinds.get(kind, kind) for kind in traits.get("block_kinds", [])]
    if traits.get("mlp"):
        out.append(f"MLP: {traits['mlp']}")
    if traits.get("norm"):
        out.append(f"{traits['norm']} gain {traits.get('norm_gain', '?')}")
    out += traits.get("attention", [])
    vision = facts.get("vision")
    out.append(f"vision: {vision['line']}" if vision else "text only")
    return out


def index_entry(facts: dict) -> dict:
    vision = facts.get("vision")
    return {
        "family": facts["family"],
        "module": facts["module"],
        "lines": facts["lines"],
        "tagline": facts["tagline"],
        "tags": facts["tags"],
        "page": f"families/{facts['family']}/",
        "facts": f"facts/{facts['family']}.json",
        "block_kinds": block_kind_summary(facts),
        "mlp": mlp_kind(facts),
        "vision": vision.get("line") if vision else None,
        "traits": facts.get("traits"),
        "trait_list": trait_list(facts),
        "num_values": sum(len(h["values"]) for h in facts["hosts"]),
        "versions": facts["versions"],
    }


def _prepare(out_dir: Path) -> None:
    if out_dir.exists():
        if not (out_dir / MARKER).exists() and any(out_dir.iterdir()):
            raise FileExistsError(
                f"{out_dir} exists and was not made by render_site (no {MARKER}); "
                f"pass an empty or new directory"
            )
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    (out_dir / MARKER).write_text("made by generator/render.py; cleared on every render\n")


def render_site(facts_dir: Path, out_dir: Path) -> None:
    """Write the whole docs tree into out_dir (cleared first): deterministic, byte for byte."""
    facts_dir, out_dir = Path(facts_dir), Path(out_dir)
    families = load_facts(facts_dir)
    _prepare(out_dir)
    for src in sorted(DOCS_SRC.rglob("*")):
        if src.is_file():
            dst = out_dir / src.relative_to(DOCS_SRC)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    assets = TEMPLATES / "assets"
    for src in sorted(assets.rglob("*")):
        if src.is_file():
            dst = out_dir / "assets" / src.relative_to(assets)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    (out_dir / "families").mkdir()
    (out_dir / "facts").mkdir()
    entries = [index_entry(f) for f in families]
    env = _env()
    for facts in families:
        (out_dir / "families" / f"{facts['family']}.md").write_text(render_family(facts), encoding="utf-8")
        (out_dir / "facts" / f"{facts['family']}.json").write_text(_dump(facts), encoding="utf-8")
    (out_dir / "families" / "index.md").write_text(
        env.get_template("families_index.md.j2").render(entries=entries), encoding="utf-8"
    )
    (out_dir / "facts" / "index.json").write_text(
        _dump({"schema": SCHEMA, "families": entries}), encoding="utf-8"
    )
    (out_dir / "llms.txt").write_text(
        env.get_template("llms.txt.j2").render(entries=entries), encoding="utf-8"
    )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname}: {record.getMessage()}")


class MkdocsBuildError(RuntimeError):
    pass


def mkdocs_build(docs_dir: Path, site_dir: Path) -> None:
    """``mkdocs build --strict`` of docs_dir into site_dir with the repository's mkdocs.yml.

    Runs in-process; any warning (from loading the config or from the build) fails it with a
    MkdocsBuildError that lists mkdocs' warnings.
    """
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    handler = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(handler)
    try:
        try:
            config = load_config(
                str(MKDOCS_YML),
                docs_dir=str(Path(docs_dir).resolve()),
                site_dir=str(Path(site_dir).resolve()),
                strict=True,
            )
            if handler.messages:
                raise MkdocsBuildError("mkdocs.yml: " + "; ".join(handler.messages))
            build(config)
        except (MkDocsException, SystemExit) as e:
            lines = "\n".join(f"  {m}" for m in handler.messages) or f"  {e}"
            raise MkdocsBuildError(f"mkdocs build --strict of {docs_dir} failed:\n{lines}") from e
        if handler.messages:  # a warning strict mode did not count (outside the build's own loggers)
            raise MkdocsBuildError(
                f"mkdocs build of {docs_dir} warned:\n" + "\n".join(f"  {m}" for m in handler.messages)
            )
    finally:
        logger.removeHandler(handler)
