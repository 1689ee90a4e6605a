"""The Compare page: any two families side by side, from their facts only.

Each family's ``compare/<family>.json`` is checked against its facts, and the page in Chromium at both widths
against what the two families' facts say differs, computed here from the facts themselves: the values whose
dims or availability differ or that one family lacks, the relations proven on one family only, the checkpoints'
numbers, and the diagram parts outlined because the other family's page does not draw them.
"""

from __future__ import annotations

import json
import re

import pytest
from browser_site import serious_axe_violations, until


def _values(facts: dict) -> dict[str, tuple | None]:
    """Every value's standard path -> its dims, or None where no load makes it available."""
    return {f"{h['path']}.{v['name']}": tuple(v["dims"]) if any(v["availability"].values()) else None
            for h in facts["hosts"] for v in h["values"]}


def _relations(facts: dict) -> set[tuple[str, str]]:
    return {(r["host"], r["text"]) for r in facts["relations"]}


_PART = re.compile(r'<g class="nc-part[^"]*"[^>]*? data-path="([^"]*)"(?: data-value="([^"]*)")?')


def _drawn_parts(out, family: str) -> tuple[set[str], set[str]]:
    """The (module path, value) of the parts the family page's block figures draw, read from its HTML: those of
    the narrow drawings (which the Compare page shows) and those of the whole figures (insides included)."""
    page = (out / "families" / family / "index.html").read_text(encoding="utf-8")
    figures = "".join(re.findall(r'<figure[^>]*class="[^"]*nc-block-figure.*?</figure>', page, re.S))
    narrow = "".join(re.findall(r'<div class="nc-scroll nc-narrow">.*?</svg>', figures, re.S))
    assert narrow, family
    return ({f"{p}|{v}" for p, v in _PART.findall(narrow)}, {f"{p}|{v}" for p, v in _PART.findall(figures)})


def test_each_familys_compare_file_says_what_its_facts_say(site, all_facts):
    out, _ = site
    for family, facts in all_facts.items():
        data = json.loads((out / "compare" / f"{family}.json").read_text(encoding="utf-8"))
        shown = {v["path"]: tuple(v["dims"]) if v["available"] else None for v in data["values"]}
        assert shown == _values(facts), family
        assert {(r["host"], r["text"]) for r in data["relations"]} == _relations(facts), family
        assert [(c["checkpoint"], c["parameters"], c["active"], c["blocks"], c["width"]) for c in data["checkpoints"]] \
            == [(s["checkpoint"], s["parameters"], s["active"], s["blocks"], s["width"]) for s in facts["sizes"]], family


def _rows(page, table: str) -> list[list[str]]:
    return page.eval_on_selector_all(f"table.nc-compare-{table} tbody tr",
                                     "rows => rows.map(r => Array.from(r.cells, c => c.textContent))")


def _open(page, base: str, query: str, pair: str) -> None:
    page.goto(f"{base}/compare/{query}")
    until(page, f"document.body.dataset.compare === {json.dumps(pair)} || document.body.dataset.compare === 'failed'",
          what=f"the comparison {pair}")
    assert page.evaluate("document.body.dataset.compare") == pair, page.text_content(".nc-compare-status")


@pytest.mark.browser
@pytest.mark.parametrize("width, a, b", [(1440, "qwen3", "qwen3_moe"), (375, "gemma2", "gemma3_text")])
def test_the_page_shows_what_differs_between_two_families(site, browser, all_facts, width, a, b):
    out, base = site
    page = browser.new_page(viewport={"width": width, "height": 900})
    _open(page, base, f"?a={a}&b={b}", f"{a}|{b}")
    va, vb = _values(all_facts[a]), _values(all_facts[b])
    differ = {p for p in va.keys() | vb.keys() if p not in va or p not in vb or va[p] != vb[p]}
    assert {r[0] for r in _rows(page, "values")} == differ
    ra, rb = _relations(all_facts[a]), _relations(all_facts[b])
    assert {(r[1], r[0]) for r in _rows(page, "relations")} == ra ^ rb
    assert page.text_content('details.nc-compare-same[data-of="relations"] summary').startswith(f"{len(ra & rb)} ")
    checkpoints = [s["checkpoint"] for f in (a, b) for s in all_facts[f]["sizes"]]
    assert [r[0] for r in _rows(page, "checkpoints")] == checkpoints
    # the outlined parts of each diagram: the ones the other family's page does not draw
    drawn = {f: _drawn_parts(out, f) for f in (a, b)}
    for side, (mine, other) in enumerate(((a, b), (b, a))):
        outlined = page.eval_on_selector_all(
            f".nc-compare-diagrams .nc-compare-col:nth-child({side + 1}) .nc-compare-only",
            "ps => ps.map(p => p.dataset.path + '|' + (p.dataset.value || ''))")
        assert set(outlined) == drawn[mine][0] - drawn[other][1], (mine, other)
        assert page.locator(f".nc-compare-diagrams .nc-compare-col:nth-child({side + 1}) svg").count() >= 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate("new Set(Array.from(document.querySelectorAll('[id]'), e => e.id)).size") \
        == page.evaluate("document.querySelectorAll('[id]').length"), "two elements share an id"
    page.close()


@pytest.mark.browser
def test_choosing_and_swapping_families_redraws_and_keeps_the_pair_in_the_url(site, browser, all_facts):
    _, base = site
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"{base}/families/gemma2/")  # a family page's link opens its pair
    page.click("a.nc-compare-link")
    until(page, "document.body.dataset.compare === 'gemma2|gemma3_text'", what="the comparison the link opens")
    _open(page, base, "?a=llama&b=mistral", "llama|mistral")
    page.select_option('select[name="b"]', "mamba")
    until(page, "document.body.dataset.compare === 'llama|mamba'", what="the comparison with mamba")
    assert "b=mamba" in page.url
    assert page.text_content("table.nc-compare-values thead th:nth-child(3)") == "B: mamba"
    page.click(".nc-compare-swap")
    until(page, "document.body.dataset.compare === 'mamba|llama'", what="the swapped comparison")
    assert "a=mamba" in page.url and "b=llama" in page.url
    page.reload()
    until(page, "document.body.dataset.compare === 'mamba|llama'", what="the comparison after a reload")
    page.close()


@pytest.mark.browser
@pytest.mark.parametrize("width, scheme", [(1440, "light"), (375, "dark")])
def test_the_compare_page_has_no_serious_axe_violation(site, browser, width, scheme):
    from axe_playwright_python.sync_playwright import Axe

    _, base = site
    page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
    _open(page, base, "?a=qwen3_next&b=qwen3_5_moe_text", "qwen3_next|qwen3_5_moe_text")
    assert serious_axe_violations(Axe(), page) == []
    page.close()


def test_each_family_page_links_its_comparison_with_the_family_sharing_most_with_it(site, all_facts):
    """The link's partner is the family with the largest share of values (with their dims) and relations in common
    (of the two families' together), computed here from the facts; ties by name."""
    out, _ = site

    def own(f):
        return ({(f"{h['path']}.{v['name']}", tuple(v["dims"])) for h in f["hosts"] for v in h["values"]}
                | {(r["host"], r["text"]) for r in f["relations"]})

    sets = {name: own(f) for name, f in all_facts.items()}
    for name, mine in sets.items():
        best = sorted(sets, key=lambda o: (-len(mine & sets[o]) / len(mine | sets[o]), o) if o != name else (2, o))[0]
        page = (out / "families" / name / "index.html").read_text(encoding="utf-8")
        assert f'href="../../compare/?a={name}&amp;b={best}"' in page, (name, best)

