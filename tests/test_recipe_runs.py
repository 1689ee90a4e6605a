"""The Recipes page (generator/notes/recipe_runs.py) on a sample of families, run here as ``make site`` runs it on
every family (the suite's own builds read the runs kept and run none: NNCANON_RECIPES, generator/build.py): every
recipe either served a family (its blocks ran on that family's tiny checkpoint and every assert held) or carries
nncanon's one-line reason, and the rendered page says which families each recipe ran on and prints each reason; a
recipe that fails on a family it claims fails in one line naming the family, the recipe, the block and its line."""

from __future__ import annotations

from html import escape

import pytest

from generator.facts.collect import cache_key
from generator.notes.docs_run import DOCS_SRC
from generator.notes.recipe_runs import (
    PAGE,
    SETUP,
    RecipeError,
    cached_run,
    load_runs,
    run_family,
    run_key,
    sections,
)
from generator.recipe.family import get_family
from generator.site.recipes_page import reason_line, recipes_page

TEXT = (DOCS_SRC / PAGE).read_text()
TITLES = [title for title, _ in sections(TEXT) if title != SETUP]


#: the families the runs below name, and one of each other kind of block and input (a Mamba mixer, a mixture, an
#: encoder-decoder, speech, an image-text line, a hybrid of DeltaNet and attention)
SAMPLE = ("llama", "gpt2", "gemma2", "granite", "qwen3_moe", "mamba", "t5", "whisper", "llava", "qwen3_5_moe_text")


@pytest.fixture(scope="module")
def kept(native_facts, tmp_path_factory):
    directory = tmp_path_factory.mktemp("recipes")
    for name in SAMPLE:
        family = get_family(name)
        cached_run(family, directory, cache_key(family), lambda line: None)
    return directory


@pytest.fixture(scope="module")
def runs(kept):
    return load_runs(kept)


def test_every_recipe_served_or_refused_on_each_family_of_the_sample(runs, kept):
    for family in map(get_family, SAMPLE):
        run = runs.get(family.family)
        assert run is not None, f"{family.family}: no recipe runs kept in {kept}"
        assert (kept / f"{family.family}.key").read_text().strip() == run_key(cache_key(family)), family.family
        served, refused = set(run["served"]), set(run["refused"])
        assert served | refused == set(TITLES) and not served & refused, (family.family, served, refused)
        for title, reason in run["refused"].items():
            assert reason.strip() and "\n" not in reason, (family.family, title, reason)


def test_attribution_serves_the_families_it_failed_on(runs):
    """Issue 51's failures: direct logit attribution on gpt2 (a LayerNorm with a bias, b_O) and gemma2 (sandwich
    norms, a final softcap) runs, with its checks that the shares, the biases and the step past the head sum to the
    logit; the decomposition's recipe too."""
    for family in ("llama", "gpt2", "gemma2", "granite"):
        for title in ("Direct logit attribution per head", "Weights, circuits and the residual decomposition",
                      "Logit lens"):
            assert title in runs[family]["served"], (family, title, runs[family]["refused"].get(title))


def test_a_recipe_a_family_cannot_serve_says_why_on_the_page(runs):
    page = recipes_page(TEXT, runs)
    assert "Forcing an expert" in runs["qwen3_moe"]["served"]
    dense = runs["llama"]["refused"]["Forcing an expert"]
    assert "dense MLP" in dense and f"<li><code>llama</code>: {escape(reason_line(dense))}</li>" in page
    no_attention = runs["mamba"]["refused"]["Direct logit attribution per head"]
    assert "self_attn" in no_attention and f"<li><code>mamba</code>: {escape(reason_line(no_attention))}</li>" in page
    assert page.count('<details class="nc-refused" data-search-exclude>') == page.count("</ul></details>") > 0
    for title in TITLES:  # under every recipe, the count of families it ran on
        served = sum(title in run["served"] for run in runs.values())
        section = page[page.index(f"## {title}"):]
        assert f"<strong>Ran on {served} of {len(runs)} families at build</strong>" in section.split("\n## ")[0], title


def test_a_failing_recipe_names_the_family_the_recipe_and_the_line():
    text = TEXT.split("\n## ")[0] + "\n## Broken\n\n```python\nx = 1\n```\n\n```python\nassert x == 2, 'x is one'\n```\n"
    with pytest.raises(RecipeError) as caught:
        run_family(get_family("gpt2"), text=text)
    message = str(caught.value)
    line = text[:text.index("assert x == 2")].count("\n") + 1
    assert message == f"gpt2: docs_src/{PAGE}, recipe 'Broken', python block {len(sections(text)[0][1]) + 2} " \
                      f"(line {line}): an assert fails: assert x == 2, 'x is one': AssertionError: x is one", message


def test_runs_once_until_the_family_or_the_page_changes(tmp_path, monkeypatch):
    import generator.notes.recipe_runs as recipe_runs

    ran = []
    monkeypatch.setattr(recipe_runs, "run_family", lambda family: ran.append(family.family) or
                        {"served": [], "refused": {}, "cpu_seconds": 0})
    family, quiet = get_family("llama"), lambda line: None
    assert cached_run(family, tmp_path, "facts-1", quiet)[1] and not cached_run(family, tmp_path, "facts-1", quiet)[1]
    assert cached_run(family, tmp_path, "facts-2", quiet)[1]  # the family's facts key moved
    monkeypatch.setattr(recipe_runs, "run_key", lambda key: "the page changed")
    assert cached_run(family, tmp_path, "facts-2", quiet)[1] and ran == ["llama"] * 3
