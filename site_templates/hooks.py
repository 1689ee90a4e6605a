"""mkdocs hooks (mkdocs.yml `hooks:`): the families in the nav, grouped by line.

The family pages are generated (generator/site/render.py writes docs/families/<family>.md and
docs/facts/index.json), so the nav in mkdocs.yml cannot name them; this lists them under Families,
one section per line group (facts/index.json's ``group``), groups and families sorted by name. No torch here.
"""

import html
import json
import os
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
    # mkdocs' nav template prints titles unescaped (its Jinja does not autoescape): a group is YAML text
    return [{html.escape(group, quote=False): [{html.escape(p, quote=False): f"families/{p}.md"} for p in members]}
            for group, members in sorted(groups.items(), key=lambda g: g[0].casefold())]


def on_config(config):
    for item in config.nav or []:
        if isinstance(item, dict) and "Families" in item:
            item["Families"] = ["families/index.md", *_grouped(Path(config.docs_dir))]
    return config


# -- generated HTML skips Markdown, and what the search leaves out skips the search's parser -------------
# The family pages are mostly HTML the renderer wrote (the diagrams, the support tables, the printout: a flagship
# page is half a megabyte), which Markdown's HTML parser would read tag by tag only to pass it through unchanged,
# and most of it the search leaves out (data-search-exclude) after its own parser read it tag by tag: together
# nearly half of the whole site's mkdocs run. So each such block (a block-level element at the start of a line,
# after a blank one or another such block, outside a code fence, with no `markdown` attribute, through its matching
# close at a line's end) is set aside before Markdown and put back, verbatim, where Markdown left its stand-in:
# before the search reads the page, or after it where the block's own element is left out of the search and holds
# no heading (a heading starts a search section even there). tests/test_md_islands.py builds the site both ways and
# finds every byte the same, the search index's too. NNCANON_MD_ISLANDS=off turns it off (that test).

_BLOCK_START = re.compile(r"<(div|details|table|pre|figure|section|nav|p|ul|ol|dl|aside)[\s>]")
_LATE = re.compile(r"<\w+(?:\s[^>]*)?\sdata-search-exclude[\s>=]")
_HEADING = re.compile(r"<h[1-6][\s>]")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_STAND_IN = '<div data-nc-island="{}"></div>'
_LATE_STAND_IN = '<div data-nc-late="{}"></div>'
_islands: dict[str, tuple[list[str], list[str]]] = {}


def set_aside(markdown: str) -> tuple[str, list[str], list[str]]:
    """The text with each generated HTML block replaced by a stand-in; the blocks put back before the search reads
    the page, and those put back after, each in order."""
    lines = markdown.split("\n")
    out, early, late, fence, i, stand_in = [], [], [], None, 0, None
    while i < len(lines):
        line = lines[i]
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not line.strip().strip(fence[0]):
                fence = None
        elif opened:
            fence = opened.group(1)
        elif (start := _BLOCK_START.match(line)) and (i == 0 or not lines[i - 1].strip() or out[-1] == stand_in):
            end = _block_end(lines, i, start.group(1))
            block = "\n".join(lines[i:end + 1]) if end is not None else ""
            if block and "markdown=" not in block and "data-nc-island=" not in block and "data-nc-late=" not in block:
                after = _LATE.match(line) and not _HEADING.search(block)
                kept = late if after else early
                stand_in = (_LATE_STAND_IN if after else _STAND_IN).format(len(kept))
                out.append(stand_in)
                kept.append(block)
                i = end + 1
                continue
        out.append(line)
        i += 1
    return "\n".join(out), early, late


def _block_end(lines: list[str], first: int, tag: str) -> int | None:
    """The line whose end closes the block opened on ``first``, or None where Markdown would not read it as one
    raw block (its close is not at a line's end)."""
    opens, closes = re.compile(rf"<{tag}[\s>/]"), f"</{tag}>"
    depth = 0
    for j in range(first, len(lines)):
        depth += len(opens.findall(lines[j])) - lines[j].count(closes)
        if depth <= 0:
            return j if depth == 0 and lines[j].rstrip().endswith(closes) else None
    return None


def put_back(content: str, blocks: list[str], stand_in: str = _STAND_IN) -> str:
    for number, block in enumerate(blocks):
        content = content.replace(stand_in.format(number), block, 1)
    return content


def on_page_markdown(markdown, page, config, files):
    if os.environ.get("NNCANON_MD_ISLANDS") == "off":
        return markdown
    markdown, early, late = set_aside(markdown)
    _islands[page.file.src_uri] = early, late
    return markdown


def on_post_page(output, page, config):
    _, late = _islands.pop(page.file.src_uri, ((), ()))
    return put_back(output, late, _LATE_STAND_IN)


# -- search: one entry per value row ----------------------------------------------------------------
# The family pages exclude their diagrams, printout and support tables from mkdocs' per-heading index
# (data-search-exclude): those are thousands of words under three headings, so a search for a value
# landed at the top of a long page. Instead each support row becomes its own entry, titled with the
# value's full path and linking to the row's anchor; the separator in mkdocs.yml splits paths at . (not at [ ])
# so `layers[i].mlp.router_logits` finds it.

_ROW = re.compile(r'<tr id="(v-[^"]+)" data-path="([^"]+)"[^>]*>(.*?)</tr>', re.S)
_CELL = re.compile(r'<td class="nc-(layout|desc)">(.*?)</td>', re.S)
_TAG = re.compile(r"<[^>]+>")
_CODE_BLOCK = re.compile(r'(<div class="(?:language-[\w-]+ )?highlight")>')
_CHECKPOINT = re.compile(r'<th scope="col" id="(config-[^"]+)" data-checkpoint="([^"]+)"')
_rows: dict[str, list[dict]] = {}


def _text(fragment: str) -> str:
    return " ".join(html.unescape(_TAG.sub(" ", fragment)).split())


def on_pre_build(config):
    _rows.clear()
    _islands.clear()


def on_page_content(content, page, config, files):
    early, late = _islands.get(page.file.src_uri, ((), ()))
    content = put_back(content, early)
    if page.file.src_uri.startswith("families/") and page.file.src_uri != "families/index.md":
        # the notes' code is left out of the index: it repeats the value paths the rows index, and was a third of
        # the index's bytes; the prose around it says what it shows
        content = _CODE_BLOCK.sub(r"\1 data-search-exclude>", content)
        if late:
            late[:] = [_CODE_BLOCK.sub(r"\1 data-search-exclude>", block) for block in late]
        whole = put_back(content, late, _LATE_STAND_IN)  # the rows as the page will hold them
        entries = []
        for anchor, path, cells in _ROW.findall(whole):
            # the layout and the description without its condition/meaning/edit notes: where it is read (the module
            # and argument, a third of the rows' bytes) is on the row a hit opens, and no search is after it
            parts = {kind: _text(cell.split('<span class="nc-', 1)[0] if kind == "desc" else cell.split("<br>", 1)[0])
                     for kind, cell in _CELL.findall(cells)}
            text = f"{parts.get('layout', '')}. {parts.get('desc', '')}"
            # a row is what a search for a value's path is after: ranked above prose that mentions its parts
            entries.append({"location": f"{page.url}#{anchor}", "title": html.unescape(path), "text": text,
                            "boost": 10})
        # a search for a checkpoint's name ("Qwen3-30B-A3B") is after the family that serves it: each full-size
        # config's column is an entry of its own, titled with the checkpoint and ranked as a value row is
        family = page.file.src_uri.split("/")[1]
        for anchor, checkpoint in _CHECKPOINT.findall(whole):
            name = html.unescape(checkpoint)
            entries.append({"location": f"{page.url}#{anchor}", "title": name, "boost": 10,
                            "text": f"{name}: a checkpoint of the {family} family, its full-size config."})
        _rows[page.url] = entries
    return content


_FAMILY_PAGE = re.compile(r"^families/([^/#]+)/")


def on_post_build(config):
    index = Path(config.site_dir) / "search" / "search_index.json"
    if not index.exists() or not _rows:
        return
    data = json.loads(index.read_text(encoding="utf-8"))
    data["docs"] += [entry for url in sorted(_rows) for entry in _rows[url]]
    # every entry of a family page is tagged with its family: a query that names the family ("qwen3_moe
    # router_logits") ranks that family's entries first (the theme boosts tags far above text), and each
    # result shows which family it is from
    for doc in data["docs"]:
        family = _FAMILY_PAGE.match(doc["location"])
        if family and family.group(1) != "index.html":
            doc["tags"] = [family.group(1)]
    # the theme makes every query term a prefix ("i*" for the i of layers[i]) and boosts tags a millionfold, so a
    # family whose name starts with a path's letter (idefics3) outranked the row a path names; a tag weighed as a
    # few words of text still puts the family a query names first among rows that match it equally, and no longer
    # outweighs a term of the row's own path
    fields = data.setdefault("config", {}).setdefault("fields", {})
    fields["tags"] = {**fields.get("tags", {}), "boost": 10.0}
    index.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    _rows.clear()


# ---------------------------------------------------------------- 404.html, wherever the site is copied
#
# Without site_url, mkdocs writes 404.html with root-absolute URLs ("/assets/...", "/families/"), since
# a server shows that page for a missing URL at any depth, where relative ones would not resolve. Under
# a sub-path ("https://host/docs/") those point outside the site. So: the URLs become relative to a
# <base> that a script at the top of <head> sets to the site's root, found by asking the server, from
# the page's own directory up, for a file every build has (a HEAD request each, a few at most).
# Material's own config (its base and search worker) is moved to that root before its bundle reads it.

_ROOT_ABSOLUTE = re.compile(r'(\s(?:href|src)=")/(?!/)([^"]*)"')
_FIND_ROOT = (
    "<script>(function(){var d=location.pathname.replace(/[^/]*$/,'');"
    "for(var n=0;n<12;n++){try{var x=new XMLHttpRequest();x.open('HEAD',d+'assets/nncanon.css',false);"
    "x.send();if(x.status===200)break}catch(e){}if(d==='/')break;d=d.replace(/[^/]*\\/$/,'')}"
    "var b=document.createElement('base');b.href=d;document.head.appendChild(b)})()</script>"
)
_MOVE_CONFIG = (
    "<script>(function(){var c=document.getElementById('__config');if(!c)return;var j=JSON.parse(c.textContent);"
    "j.base=new URL('.',document.baseURI).href;"
    "if(j.search)j.search=new URL(j.search.replace(/^\\//,''),document.baseURI).href;"
    "c.textContent=JSON.stringify(j)})()</script>"
)

SCOPE_404 = '__md_scope=new URL(".",document.baseURI)'  # generator/site/html_guard.py allows the theme's script with it


def relocatable_404(page: str) -> str:
    """404.html with its root-absolute URLs made relative to the site's root, found where it is served."""
    page = _ROOT_ABSOLUTE.sub(lambda m: f'{m.group(1)}./{m.group(2)}"', page)
    page = page.replace("<head>", "<head>" + _FIND_ROOT, 1)
    page = page.replace('__md_scope=new URL("/",location)', SCOPE_404, 1)
    head, sep, rest = page.partition('<script id="__config"')
    if sep:
        end = rest.index("</script>") + len("</script>")
        page = head + sep + rest[:end] + _MOVE_CONFIG + rest[end:]
    return page


def on_post_template(output_content, template_name, config):
    if template_name == "404.html" and not config.site_url:
        return relocatable_404(output_content)
    return output_content
