"""The family page's Weights section, from the facts alone (no torch): every standard weight each host kind carries
(``facts["weights"]``, measured by generator/facts/weight_rows.py), its layout, its shape at the full-size printout
checkpoint, what a read gives (a view of the parameter, a gain the forward computes, no such bias, or a refusal and
its reason) and the relations the build checked that state it (the relations on the same host that name it).
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from generator.site.escaping import ident_breaks, ranges

#: what each measured status says in the table
STATUS = {"view": "view", "gathered": "gathered, edits land", "computed": "computed, read-only", "none": "none",
          "refused": "refused"}


def full_shape(dims: str, sizes: dict[str, int]) -> str:
    """``"num_heads hidden_size head_dim"`` at the printout checkpoint's sizes: ``"[32, 4096, 128]"``; a dimension
    the printout does not size stays by name."""
    if not dims:
        return ""
    return "[" + ", ".join(str(sizes.get(d, d)) for d in dims.split()) + "]"


def host_sizes(printout: dict, path: str, host_class: str, weight: str | None = None) -> dict[str, int]:
    """The full-size sizes of the dimensions a host kind's values and weights name: the model's, the vision
    encoder's under ``model.vision``, and the kind's own where its weights give another (a mixture's expert width,
    generator/facts/host_dims.py), or ``weight``'s own where the kind's weights disagree (Mllama's W_E)."""
    sizes = dict(printout.get("dims") or {})
    if path.startswith("model.vision"):
        sizes.update(printout.get("vision_dims") or {})
    for kind in printout.get("host_dims") or []:
        if kind["host"] == path and kind["class"] == host_class:
            sizes.update(kind["dims"])
            sizes.update((kind.get("weights") or {}).get(weight) or {})
    return sizes


def proving(name: str, host: str, relations: list[dict], blocks: list[int] = ()) -> list[str]:
    """The texts of the checked relations on ``host`` (on any of ``blocks``, if given) that name the weight ``name``
    as a word."""
    word = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)")
    return [r["text"] for r in relations if r.get("host") == host and word.search(r["text"])
            and (not blocks or not r.get("blocks") or set(blocks) & set(r["blocks"]))]


def rows(facts: dict) -> list[dict]:
    """One row per weight per host kind, with its full-size shape and the relations that prove it."""
    printout = facts.get("printout") or {}
    relations = facts.get("relations") or []
    out = []
    for kind in facts.get("weights") or []:
        for w in kind["weights"]:
            sizes = host_sizes(printout, kind["host"], kind["class"], w["name"])
            out.append({"host": kind["host"], "class": kind["class"], "blocks": kind.get("blocks") or [],
                        "name": w["name"], "dims": w["dims"], "shape": "" if w["status"] in ("none", "refused") else full_shape(w["dims"], sizes),
                        "status": w["status"], "why": w["why"],
                        "relations": proving(w["name"], kind["host"], relations, kind.get("blocks") or [])})
    return out


def _blocks(blocks: list[int], before: str = "<br>") -> str:
    """``[0, 1, 2, 5]`` -> ``blocks 0–2, 5``, as the relations table writes them."""
    return f"{before}<span class=\"nc-also\">blocks {escape(ranges(sorted(blocks)))}</span>" if blocks else ""


def _hosts(table: list[dict]) -> list[tuple[dict, list[dict]]]:
    """The rows grouped by host kind (host, class, blocks), in the order the facts give them."""
    groups: dict[tuple, tuple[dict, list[dict]]] = {}
    for r in table:
        key = (r["host"], r["class"], tuple(r["blocks"]))
        groups.setdefault(key, (r, []))[1].append(r)
    return list(groups.values())


def weights_section(facts: dict) -> Markup:
    """The section's HTML: a fold per host kind, each a table of its weights (empty for facts with no weights)."""
    table = rows(facts)
    if not table:
        return Markup("")
    checkpoint = escape((facts.get("printout") or {}).get("checkpoint", ""))
    lines = ['<div class="nc-section nc-weights">',
             f'<p class="nc-intro" data-search-exclude>Each standard weight is a plain attribute of its host, read outside any trace. '
             f'A view is the parameter itself or a view of it (an edit under <code>torch.no_grad()</code> lands in '
             f'the model); a gathered weight is a copy of heads no stride walks in order, every edit of it written back into '
             f'the parameter; a computed gain is served to read and refuses edits; a refusal is the one-line error the '
             f'read raises. The shape is the layout at <code>{checkpoint}</code>; the relations are the ones the '
             f'build checked on the tiny checkpoint that state the weight. The weights fold by host'
             f'<span class="nc-fold-all-wrap" hidden>: <button type="button" class="nc-fold-all" '
             f'data-fold="nc-weights-fold">open every host</button></span>.</p>']
    for head, group in _hosts(table):
        count = f'{len(group)} weight{"s" if len(group) != 1 else ""}'
        lines += ['<details class="nc-fold nc-weights-fold" data-search-exclude>',
                  f'<summary><code>{ident_breaks(head["host"])}</code> <span class="nc-class">{escape(head["class"])}'
                  f'</span>{_blocks(head["blocks"], " ")} <span class="nc-fold-count">{count}</span></summary>',
                  '<div class="nc-table">', '<table data-search-exclude>',
                  '<thead><tr><th>weight</th><th>layout</th><th>full-size shape</th><th>read</th>'
                  '<th>proven by</th></tr></thead>', '<tbody>']
        for r in group:
            proof = "<br>".join(f"<code>{escape(t)}</code>" for t in r["relations"]) or (
                "" if r["status"] in ("refused", "none") else '<span class="nc-no">no relation names it</span>')
            lines.append(
                f'<tr><td><code class="nc-wname">{escape(r["name"])}</code></td>'
                f'<td><code>{escape(r["dims"])}</code></td><td><code>{escape(r["shape"])}</code></td>'
                f'<td><span title="{escape(r["why"])}">{escape(STATUS.get(r["status"], r["status"]))}</span>'
                + (f'<br><span class="nc-also">{escape(r["why"])}</span>' if r["status"] in ("refused", "gathered") else "")
                + f'</td><td>{proof}</td></tr>')
        lines += ['</tbody>', '</table>', '</div>', '</details>']
    lines += ['</div>']
    return Markup("\n".join(lines))
