"""The renderer: facts JSON -> family page -> docs tree -> strict mkdocs site. No torch anywhere.

Works from the hand-written fixture tests/fixtures/facts/qwen3_5_moe_text.json (the reference
page's content in the facts schema), so it runs without any model.
"""

import copy
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import markdown
import pytest
import yaml
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from limits import HANG  # noqa: E402

from generator.site.render import (  # noqa: E402
    FactsError,
    MkdocsBuildError,
    escape_markdown,
    mkdocs_build,
    printout_lines,
    render_family,
    render_site,
)

FIXTURES = ROOT / "tests" / "fixtures" / "facts"
FAMILY = "qwen3_5_moe_text"

# The reference page's section headings, in its order (spec/000_*.txt; "nnterp" there is nncanon).
SECTIONS = [
    "01 · the residual stream",
    "The vision encoder",
    "02 · support()",
    "Values, by host",
    "the vision encoder · Qwen ViT",
    "Printout",
    "Config",
    "Vision Config",
    "03 · what to know before you run",
    "Sparse autoencoders",
    "Vision notes",
    "04 · nncanon/families/qwen3_5_moe_text.py",
]


@pytest.fixture(scope="module")
def facts():
    return json.loads((FIXTURES / f"{FAMILY}.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def page(facts):
    return render_family(facts)


def to_html(md: str) -> str:
    """The page through Python-Markdown with mkdocs.yml's own extensions (what mkdocs does to it)."""
    conf = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    names, configs = [], {}
    for ext in conf["markdown_extensions"]:
        if isinstance(ext, dict):
            ((name, cfg),) = ext.items()
            names.append(name)
            configs[name] = cfg or {}
        else:
            names.append(ext)
    body = md.split("---\n", 2)[2] if md.startswith("---\n") else md  # front matter
    return markdown.markdown(body, extensions=names, extension_configs=configs)


def heading_texts(md: str) -> list[str]:
    out = []
    for line in md.splitlines():
        m = re.match(r"^#{1,6} (.*?)(?: \{ #[\w-]+ \})?$", line)
        if m:
            out.append(m.group(1).replace("\\", ""))
    return out


def rows(page_html: str) -> dict[str, str]:
    """data-path -> the unescaped text and markup of that support-table row."""
    return {
        m.group(1): html.unescape(m.group(0))
        for m in re.finditer(r'<tr id="v-[^"]*" data-path="([^"]*)".*?</tr>', page_html, re.S)
    }


def test_sections_in_the_reference_order(page):
    heads = heading_texts(page)
    positions = [heads.index(s) for s in SECTIONS]
    assert positions == sorted(positions), [heads[p] for p in positions]
    assert heads[0] == FAMILY


def test_sections_have_permalinks(page):
    out = to_html(page)
    for hid in (
        "the-residual-stream",
        "support",
        "printout",
        "config",
        "vision-config",
        "notes",
        "sparse-autoencoders",
        "vision-notes",
        "family-module",
        "the-block-in-order",
    ):
        assert re.search(rf'<h[1-6] id="{hid}">.*?<a class="headerlink" href="#{hid}"', out), hid


def test_every_value_of_every_host_with_layout_and_read_at(facts, page):
    table = rows(page)
    n = 0
    for host in facts["hosts"]:
        assert f'data-path="{host["path"]}"' in page
        for v in host["values"]:
            row = table[f"{host['path']}.{v['name']}"]
            assert f"<code>{v['name']}</code>" in row
            assert f"<code>{v['layout']}</code>" in row
            if v["dims"]:
                assert f"[{' '.join(v['dims'])}]" in row
            assert v["description"] in row
            assert f'<td class="nc-read">{v["read_at"]}</td>' in row
            if v["measured"] and v["measured"]["shape"] is not None:
                assert f"tiny [{', '.join(map(str, v['measured']['shape']))}] {v['measured']['dtype']}" in row
            elif v["measured"]:
                assert "tiny: " in row
            n += 1
    assert n == len(table) == 66


def test_conditions_marked_on_hover_and_in_text(facts, page):
    table = rows(page)
    conditional = [(h["path"], v) for h in facts["hosts"] for v in h["values"] if v["conditions"]]
    assert len(conditional) == 21
    for path, v in conditional:
        row = table[f"{path}.{v['name']}"]
        for c in v["conditions"]:
            assert re.search(r'<span class="nc-warn" title="[^"]*needs ' + re.escape(c["needs"]), row)
            if c["needs"]:
                assert re.search(r'<span class="nc-cond">⚠︎ [^<]*<code>' + re.escape(c["needs"]) + "</code>", row)
            else:  # a value the host never serves
                assert "Unavailable under every load" in row
            assert c["why"] in row
    plain = [r for r in table.values() if "nc-conditional" not in r]
    assert plain and not any("⚠︎" in r for r in plain)
    never = table["model.vision.layers[i].self_attn.attention_scores"]
    assert "Unavailable under every load" in never and "not on the tiny checkpoint" in never


def test_diagrams_carry_standard_paths(facts, page):
    for kind in facts["stack"]["block_kinds"]:
        for part in kind["parts"]:
            assert re.search(
                r'<g class="nc-part[^"]*" id="part-[\w-]+" data-path="' + re.escape(part["id"]) + '"', page
            ), part["id"]
        assert kind["relations"], kind["kind"]
        for relation in kind["relations"]:
            assert f"<code>{html.escape(relation['text'], quote=False)}</code>" in page
    for part in facts["vision"]["parts"]:
        assert f'data-path="{part["id"]}"' in page
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "duplicate ids on the page"
    assert page.count("error 0 (exact)") >= 3
    for name in ("rows", "positions", "masking", "final norm"):
        assert f"<dt>{name}</dt>" in page


def test_printout_lines_wrapped_with_paths(facts, page):
    text = facts["printout"]["text"]
    # each line's span ends with its newline (so print can leave a repeated block's lines out whole); the first line
    # of a repeated block carries the print-only note naming the block it repeats
    spans = re.findall(
        r'<span class="line[^"]*"(?: data-path="([^"]*)")?(?: data-layers="[^"]*")?>(.*?)\n</span>', page, re.S
    )
    assert [html.unescape(re.sub(r'<span class="nc-same">.*?</span>', "", s)) for _, s in spans] == text.splitlines()
    paths = {p for p, _ in spans}
    for p in (
        "model",
        "model.lm_head",
        "model.layers[i].mlp.router",
        "model.layers[i].mlp.router_logits",
        "model.layers[i].linear_attn.states",
        "model.vision.layers[i].self_attn.attention_queries",
        "model.vision.merger",
        "model.input_size",
        "model.logits",
    ):
        assert p in paths, p
    lines = printout_lines(text)
    assert all(r["path"] for r in lines if r["text"].lstrip().startswith("("))
    assert sum(1 for r in lines if r["kind"] == "value") > 100


def _config_rows(page: str, table_id: str) -> dict[str, list[str]]:
    """The config table's rows: field -> the cells' text, one per column."""
    table = page.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in re.findall(r"<tr[^>]*><th scope=\"row\">(.*?)</tr>", table, re.S):
        key = re.sub(r"<[^>]+>", "", row.split("</th>", 1)[0]).split(" ◆")[0].strip()
        rows[key] = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
    return rows


def test_config_is_one_table_with_a_column_per_checkpoint(facts, page):
    header = page.split('id="config-table"', 1)[1].split("</thead>", 1)[0]
    for conf in facts["configs"]:  # each merged group is one column, its other checkpoints named in it
        assert f"<code>{conf['checkpoint']}</code>" in header
        for also in conf["also"]:
            assert f"<code>{also}</code>" in header
    rows = _config_rows(page, "config-table")
    assert rows["model.vocab_size"] == ["248320"] * len(facts["configs"])
    assert rows["model.num_layers"] == [str(dict(c["accessors"])["model.num_layers"]) for c in facts["configs"]]
    assert rows["tie_word_embeddings"] == ["False"] * len(facts["configs"])
    assert "varies" in _config_rows(page, "vision-config-table")["model.vision.image_size"]


def test_rows_that_differ_are_marked_and_equal_rows_are_not(facts, page):
    table = page.split('id="config-table"', 1)[1].split("</table>", 1)[0]
    marked = {re.sub(r"<[^>]+>", "", m) for m in re.findall(r'<tr class="nc-differs"><th scope="row">(.*?)<span', table)}
    for key, cells in _config_rows(page, "config-table").items():
        assert (key in marked) == (len(set(cells)) > 1), key


def test_inferred_fields_are_marked_on_the_page(facts):
    marked = copy.deepcopy(facts)
    first = marked["configs"][0]
    first["inferred"] = [[first["checkpoint"], "vocab_size", "the <b>default</b>, not read"],
                         [first["also"][0], "same_as", "its config.json was not among the sources"]]
    page = render_family(marked)
    rows = page.split('id="config-table"', 1)[1].split("</table>", 1)[0]
    vocab = next(r for r in rows.split("<tr") if '<code>vocab_size</code>' in r)
    assert vocab.count("nc-inferred") == 1 and "&lt;b&gt;default&lt;/b&gt;, not read" in vocab
    assert f"<code>{first['also'][0]}</code><sup class=\"nc-inferred\"" in rows
    notes = page.split('<ul class="nc-inferred-notes">', 1)[1].split("</ul>", 1)[0]
    assert "its config.json was not among the sources" in notes and "<code>vocab_size</code>" in notes


def test_notes_render_as_markdown_with_code(page):
    out = to_html(page)
    assert '<h3 id="the-mixture">' in out
    assert out.count('<div class="language-python highlight">') >= 10
    assert "moe.expert_weights.masked_fill" in html.unescape(re.sub(r"<[^>]+>", "", out))
    assert "Qwen/SAE-Res-Qwen3.5-35B-A3B-Base-W128K-L0_100" in out
    assert "<td>Qwen2.5-VL</td>" in out


def test_facts_text_cannot_inject_html(facts):
    evil = copy.deepcopy(facts)
    evil["tagline"] = "<script>alert('tagline')</script>"
    evil["tags"] = ['"><img src=x onerror=alert(1)>']
    evil["hosts"][0]["values"][0]["description"] = "<script>alert('row')</script>"
    evil["hosts"][0]["values"][0]["conditions"] = [
        {"needs": '"><script>alert(2)</script>', "why": "<b>x</b>"}
    ]
    evil["notes"][0]["title"] = "<script>alert('title')</script> {: onclick=alert(3) }"
    evil["notes"][0]["markdown"] = (
        "Text <script>alert('note')</script> and <img src=x onerror=alert(4)>.\n"
        '{: onclick="alert(5)" }\n\n'  # a [link](javascript:...) fails the render: tests/test_hostile_input.py
        "```python {: onclick=alert(7) }\nx = '<script>kept as code</script>'\n```\n"
    )
    evil["docstring"] = "<script>alert('doc')</script>"
    evil["printout"]["text"] = "Model(\n  (x) -> <script>alert(8)</script>\n)"
    out = to_html(render_family(evil))
    assert "<script" not in out.replace("&lt;script", "")
    assert "onerror" not in re.sub(r"&lt;.*?&gt;", "", out)  # only as escaped text
    assert not re.search(r"<[^>]+\sonclick=", out)
    assert "javascript:" not in out
    assert "Text &lt;script&gt;alert('note')&lt;/script&gt;" in out
    assert "kept as code" in out


def test_text_only_family_leaves_out_the_vision_sections(facts):
    text = {k: v for k, v in facts.items() if k not in ("vision", "vision_configs", "vision_notes", "saes")}
    text["hosts"] = [h for h in facts["hosts"] if h["section"] == "text"]
    heads = heading_texts(render_family(text))
    assert "02 · support()" in heads and "Printout" in heads and "Config" in heads
    for gone in ("The vision encoder", "Vision Config", "Vision notes", "Sparse autoencoders"):
        assert gone not in heads
    assert not any("vision encoder" in h for h in heads)


def test_escape_markdown_keeps_code():
    md = "a <b> `x<y>` b\n\n```\n<i>{: x }\n```\nafter {: .c }"
    out = escape_markdown(md)
    assert "a &lt;b&gt; `x<y>` b" in out
    assert "```\n<i>{: x }\n```" in out
    assert out.endswith("after \\{: .c \\}")


def test_bad_facts_say_which_field(facts, tmp_path):
    broken = {k: v for k, v in facts.items() if k != "hosts"}
    (tmp_path / f"{FAMILY}.json").write_text(json.dumps(broken))
    with pytest.raises(FactsError, match=r"qwen3_5_moe_text\.json: field 'hosts' is missing"):
        render_site(tmp_path, tmp_path / "docs")
    wrong = dict(facts, schema=2)
    with pytest.raises(FactsError, match="schema 2"):
        render_family(wrong)


@pytest.mark.slow
def test_site_builds_strictly_without_torch(tmp_path):
    """render_site + mkdocs_build in a fresh interpreter: the site builds, and torch never loads."""
    docs, site = tmp_path / "docs", tmp_path / "site"
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from generator.site.render import render_site, mkdocs_build;"
        "render_site(Path(sys.argv[2]), Path(sys.argv[3]), survey=Path(sys.argv[5]));"
        "mkdocs_build(Path(sys.argv[3]), Path(sys.argv[4]));"
        "assert 'torch' not in sys.modules, 'the renderer imported torch'"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(ROOT), str(FIXTURES), str(docs), str(site),
         str(ROOT / "tests" / "fixtures" / "survey")],
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    assert run.returncode == 0, run.stderr[-3000:]

    for rel in (
        "index.html",
        "getting-started/index.html",
        "concepts/index.html",
        "large-models/index.html",
        "contributing/index.html",
        "families/index.html",
        f"families/{FAMILY}/index.html",
        "facts/index.json",
        f"facts/{FAMILY}.json",
        "llms.txt",
        "coverage/index.html",
        "assets/nncanon.css",
        "assets/nncanon.js",
        "assets/nncanon-events.js",
    ):
        assert (site / rel).is_file(), rel
    page = (site / "families" / FAMILY / "index.html").read_text(encoding="utf-8")
    for hid in (
        "the-residual-stream",
        "the-vision-encoder",
        "support",
        "printout",
        "config",
        "notes",
        "sparse-autoencoders",
        "vision-notes",
        "family-module",
    ):
        assert f'id="{hid}"' in page
    assert 'data-path="model.layers[i].mlp.router_logits"' in page
    assert "assets/nncanon.css" in page and "assets/nncanon.js" in page and "assets/nncanon-events.js" in page
    assert "fonts.googleapis" not in page and "cdn." not in page and "unpkg" not in page
    index = (site / "families" / "index.html").read_text(encoding="utf-8")
    assert f'href="{FAMILY}/"' in index and "gated DeltaNet × 30" in index
    published = json.loads((site / "facts" / "index.json").read_text())
    assert [e["family"] for e in published["families"]] == [FAMILY]
    assert published["families"][0]["mlp"] == "mixture of experts + shared expert"
    # the published facts are the collected ones, with the releases the kept records verified the family on
    kept = [json.loads(p.read_text())["families"] for p in sorted((ROOT / "releases").glob("transformers-*.json"))]
    on = [json.loads(p.read_text())["transformers"] for p, families in
          zip(sorted((ROOT / "releases").glob("transformers-*.json")), kept) if FAMILY in families]
    on = sorted(on, key=Version)
    assert json.loads((site / "facts" / f"{FAMILY}.json").read_text()) == {
        **json.loads((FIXTURES / f"{FAMILY}.json").read_text()), "verified_on": on}
    assert f"Verified on transformers {', '.join(on)}" in page and (site / "releases" / "index.html").is_file()
    llms = (site / "llms.txt").read_text()
    assert llms.startswith("# nncanon encyclopedia\n")
    assert f"[{FAMILY}](families/{FAMILY}/)" in llms and f"facts/{FAMILY}.json" in llms


@pytest.mark.slow
def test_strict_build_fails_with_mkdocs_warnings(tmp_path):
    docs = tmp_path / "docs"
    render_site(FIXTURES, docs)
    (docs / "concepts.md").write_text("# Concepts\n\nSee [the missing page](missing-page.md).\n")
    with pytest.raises(MkdocsBuildError, match="missing-page.md"):
        mkdocs_build(docs, tmp_path / "site")


def test_render_site_is_deterministic(tmp_path):
    render_site(FIXTURES, tmp_path / "a")
    render_site(FIXTURES, tmp_path / "b")
    a = {
        p.relative_to(tmp_path / "a"): p.read_bytes()
        for p in sorted((tmp_path / "a").rglob("*"))
        if p.is_file()
    }
    b = {
        p.relative_to(tmp_path / "b"): p.read_bytes()
        for p in sorted((tmp_path / "b").rglob("*"))
        if p.is_file()
    }
    assert a == b
    assert Path("families") / f"{FAMILY}.md" in a and Path("llms.txt") in a
    render_site(FIXTURES, tmp_path / "a")  # re-rendering over its own output is fine
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("not the renderer's")
    with pytest.raises(FileExistsError):
        render_site(FIXTURES, tmp_path / "mine")
