"""The Mechanics page's chains in real Chromium (the browser site: tests/browser_site.py, the fixture family's
mechanics): each is one image with a title and a description, its text at full size, in a box that scrolls on its
own at 375 px while the page does not, with its edges listed as text. Its axe audit and console, like every page's,
are tests/test_browser.py's (1440 px, light and dark) and tests/test_browser_mobile.py's (375 px)."""

from __future__ import annotations

import pytest
from browser_site import Tab, settled

pytestmark = [pytest.mark.browser]


@pytest.mark.parametrize("width,scheme", [(1440, "light"), (375, "dark")])
def test_the_mechanics_chains_read_on_a_phone_and_a_desktop(browser, base, width, scheme):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    t = Tab(context.new_page())
    page = t.open(f"{base}/mechanics/")
    settled(page)
    figures = page.locator(".nc-mechanic-chain")
    assert figures.count() >= 1  # the fixture family's mixture and shared expert
    for i in range(figures.count()):
        figure = figures.nth(i)
        svg = figure.locator("svg.nc-dataflow")
        assert svg.get_attribute("role") == "img"
        named = svg.get_attribute("aria-labelledby").split()
        assert [svg.locator(f"#{n}").text_content().strip() != "" for n in named] == [True, True]
        box = figure.locator(".nc-interior-scroll").evaluate("e => e.getBoundingClientRect().right")
        assert box <= width
        sizes = figure.locator(".nc-chip-label").evaluate_all("els => els.map(e => e.getBoundingClientRect().height)")
        assert sizes and min(sizes) >= 11  # 12 px text, never shrunk to fit
        arcs = svg.locator("path.nc-edge").count()
        assert figure.locator("details li").count() == arcs > 0
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert not t.errors
    context.close()
