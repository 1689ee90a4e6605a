"""The Coverage page in Chromium: its facets filter the rows (OR within a facet, AND across), count them,
and keep the state in the URL, as the families index's do (the same script, families-filter.js)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser]


def _shown(page) -> list[str]:
    return page.eval_on_selector_all("table.nc-coverage tbody tr:not([hidden])", "rows => rows.map(r => r.id)")


def test_facets_filter_the_rows(tab, base):
    page = tab.open(f"{base}/coverage/")
    every = _shown(page)
    assert {"t-llama", "t-gpt2", "t-qwen3_5_moe_text", "t-olmo", "t-blt"} <= set(every)
    page.click('.nc-trait[data-facet="status"][data-term="surveyed"]')
    assert _shown(page) == ["t-olmo"]
    page.click('.nc-trait[data-facet="status"][data-term="family page"]')
    assert set(_shown(page)) == {"t-olmo", "t-llama", "t-gpt2", "t-qwen3_5_moe_text"}
    assert page.inner_text(".nc-trait-count") == f"4 of {len(every)} model types"
    page.click('.nc-trait[data-facet="mlp"][data-term="plain"]')
    assert _shown(page) == ["t-gpt2"]
    url = page.url
    assert "status=surveyed" in url and "mlp=plain" in url
    page.goto(url)  # the state survives a reload, or a shared link
    assert _shown(page) == ["t-gpt2"]
    page.click(".nc-facet-clear")
    assert _shown(page) == every and "?" not in page.url
