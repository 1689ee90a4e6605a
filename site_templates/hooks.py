"""mkdocs hooks (mkdocs.yml `hooks:`): the families in the nav, grouped by line.

The family pages are generated (generator/render.py writes docs/families/<family>.md and
docs/facts/index.json), so the nav in mkdocs.yml cannot name them; this lists them under Families,
one section per line group (facts/index.json's ``group``), groups and families sorted by name. No torch here.
"""

import html
import json
import re
from pathlib import Path


def _grouped(docs: Path) -> list:
    pages = {p.stem for p in (docs / "families").glob("*.md") if p.name != "index.md"}
    index = docs / "facts" / "index.json"
    entries = json.loads(index.read_text(encoding="utf-8"))["families"] if index.exists() else []
    group_of = {e["family"]: e.get("group") or e["family"] for e in entries}
    groups: dict[str, list[str]] = {}
    for page in sorted(pages):
        groups.setdefault(group_of.get(page, page), []).append(page)
    return [{group: [{p: f"families/{p}.md"} for p in members]} for group, members in sorted(groups.items(), key=lambda g: g[0].casefold())]


def on_config(config):
    for item in config.nav or []:
        if isinstance(item, dict) and "Families" in item:
            item["Families"] = ["families/index.md", *_grouped(Path(config.docs_dir))]
    return config


# -- search: one entry per value row ----------------------------------------------------------------
# The family pages exclude their diagrams, printout and support tables from mkdocs' per-heading index
# (data-search-exclude): those are thousands of words under three headings, so a search for a value
# landed at the top of a long page. Instead each support row becomes its own entry, titled with the
# value's full path and linking to the row's anchor; the separator in mkdocs.yml splits paths at . [ ]
# so `layers[i].mlp.router_logits` finds it.

_ROW = re.compile(r'<tr id="(v-[^"]+)" data-path="([^"]+)"[^>]*>(.*?)</tr>', re.S)
_CELL = re.compile(r'<td class="nc-(layout|desc|read)">(.*?)</td>', re.S)
_TAG = re.compile(r"<[^>]+>")
_rows: dict[str, list[dict]] = {}


def _text(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split())


def on_pre_build(config):
    _rows.clear()


def on_page_content(content, page, config, files):
    if page.file.src_uri.startswith("families/") and page.file.src_uri != "families/index.md":
        entries = []
        for anchor, path, cells in _ROW.findall(content):
            # the layout, the description without its condition/meaning/edit notes, and where it is read
            parts = {kind: _text(cell.split('<span class="nc-', 1)[0] if kind == "desc" else cell.split("<br>", 1)[0])
                     for kind, cell in _CELL.findall(cells)}
            text = f"{parts.get('layout', '')}. {parts.get('desc', '')} Read at {parts.get('read', '')}."
            entries.append({"location": f"{page.url}#{anchor}", "title": html.unescape(path), "text": text})
        _rows[page.url] = entries
    return content


def on_post_build(config):
    index = Path(config.site_dir) / "search" / "search_index.json"
    if not index.exists() or not _rows:
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    data["docs"] += [entry for url in sorted(_rows) for entry in _rows[url]]
    index.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    _rows.clear()
