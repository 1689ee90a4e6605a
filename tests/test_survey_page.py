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
