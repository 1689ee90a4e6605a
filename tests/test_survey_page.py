"""The Coverage page from survey facts (tests/fixtures/survey: five rows of a survey run, copied as written,
and an index naming them): three kinds of row that look different, a survey row that never says
"verified", facets that count the rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from generator.site.coverage import coverage_context, render_coverage
from generator.site.render import environment
from generator.survey.run import load_rows

SURVEY = Path(__file__).resolve().parent / "fixtures" / "survey"


@pytest.fixture(scope="module")
def page() -> str:
    return render_coverage(environment(), SURVEY)


def _row(page: str, model_type: str) -> str:
    found = re.search(rf'<tr id="t-{re.escape(model_type)}"[^>]*>.*?</tr>', page, re.S)
    assert found, model_type
    return found.group(0)


def test_three_kinds_of_row(page):
    index, rows = load_rows(SURVEY)
    kinds = {row["model_type"]: row for row in rows}
    llama, olmo, blt = _row(page, "llama"), _row(page, "olmo"), _row(page, "blt")
    assert 'class="nc-row-family-page"' in llama and 'href="../families/llama/"' in llama
    assert 'class="nc-row-surveyed"' in olmo and '<span class="nc-survey">survey</span>' in olmo
    assert 'class="nc-row-does-not-build"' in blt and kinds["blt"]["failure"].split(":")[0] in blt
    resolved = sum(v is None for v in kinds["olmo"]["values"].values())
    assert f"<td>{resolved} of {len(kinds['olmo']['values'])}</td>" in olmo


def test_a_survey_row_never_says_verified(page):
    for model_type in ("olmo", "blt"):
        assert "verified" not in _row(page, model_type).lower()


def test_the_closest_family_is_one_with_a_page(page):
    index, rows = load_rows(SURVEY)
    context = coverage_context(index, rows)
    olmo = next(e for e in context["entries"] if e["model_type"] == "olmo")
    assert olmo["closest"] in set(index["pages"].values())
    assert f'href="../families/{olmo["closest"]}/"' in _row(page, "olmo")


def test_facets_count_the_rows(page):
    index, rows = load_rows(SURVEY)
    facets = {f["key"]: dict(f["terms"]) for f in coverage_context(index, rows)["facets"]}
    assert facets["status"] == {"family page": 3, "surveyed": 1, "does not build": 1}
    assert sum(facets["tl"].values()) == len(rows)
    for term, count in facets["status"].items():
        assert page.count(f'data-status="{term}"') == count


def test_a_family_page_this_render_does_not_write_is_not_linked():
    page = render_coverage(environment(), SURVEY, families={"qwen3_5_moe_text"})
    assert 'href="../families/qwen3_5_moe_text/"' in _row(page, "qwen3_5_moe_text")
    llama = _row(page, "llama")
    assert 'class="nc-row-family-page"' in llama and "href=" not in llama
    assert 'href="../families/qwen3_5_moe_text/"' in _row(page, "olmo")  # the one family page there is


def test_no_survey_yet(tmp_path):
    assert "No survey has run in this build" in render_coverage(environment(), tmp_path)


def test_a_family_row_states_its_facts_and_never_the_surveys_guess():
    """qwen3_5_moe_text's survey row (the generic parts on its tree) resolves fewer values and misses the residual
    decomposition its page proves on every block; its family row gives the page's numbers, counted here from the
    facts' own lists, and each shared relation ticked only where the facts hold that relation."""
    import json

    facts = json.loads((SURVEY.parent / "facts" / "qwen3_5_moe_text.json").read_text(encoding="utf-8"))
    page = render_coverage(environment(), SURVEY, facts={"qwen3_5_moe_text": facts})
    row = _row(page, "qwen3_5_moe_text")
    served = sum(len(h["values"]) for h in facts["hosts"])
    assert f"<td>{served} served</td>" in row and f"<td>{len(facts['relations'])} checked</td>" in row
    texts = {(r["host"], r["text"]) for r in facts["relations"]}
    assert ("model.layers[i]", "layer_mid + mlp.mlp_output == layer_output") in texts
    for label in ("residual decomposition", "stack", "final norm", "head"):
        assert f"✓ {label}</span>" in row, label
    _, rows = load_rows(SURVEY)
    survey = next(r for r in rows if r["model_type"] == "qwen3_5_moe_text")
    assert f"{sum(v is None for v in survey['values'].values())} of" not in row  # not the survey's count


def test_no_closest_family_below_half_alike():
    from generator.site.coverage import ALIKE, closest, entry

    index, rows = load_rows(SURVEY)
    olmo = next(r for r in rows if r["model_type"] == "olmo")
    unlike = [("llama", {"shape: nothing olmo has"})]
    assert closest(olmo, unlike)[1] < ALIKE
    assert entry(olmo, None, unlike, {})["closest"] is None
