"""Each block kind's inside in real Chromium: its value chips are parts like the residual row's (card, pin,
URL, slider, linked rows), in the order the facts measured; a chip lights its dataflow arcs and the chips at
their other ends; the vision block's chips have the vision card; legible at 375 px (the inside scrolls in its
own focusable box, the page does not)."""

from __future__ import annotations

import pytest
from browser_site import card, family_url, part, until

pytestmark = [pytest.mark.browser]


def chips(page) -> list[str]:
    return page.eval_on_selector_all(".nc-blocks .nc-chip:visible", "els => els.map(e => e.dataset.path)")


def test_chips_follow_the_measured_order_and_the_slider(tab, base, site_facts):
    kinds = {k["kind"]: k for k in site_facts["stack"]["block_kinds"]}
    blocks = site_facts["stack"]["blocks"]
    for kind, k in kinds.items():
        page = tab.open(family_url(base, f"?block={blocks.index(kind)}"))
        assert chips(page) == [row[len("model."):] for row in k["sequence"]], kind
        border = page.eval_on_selector(".nc-blocks > .nc-block-figure.nc-current",
                                       "e => getComputedStyle(e).borderLeftColor")
        tick = page.eval_on_selector(f'.nc-tick[data-block="{blocks.index(kind)}"]',
                                     "e => getComputedStyle(e).backgroundColor")
        assert border == tick, kind  # the figure wears its kind's colour
    assert not tab.errors


def test_a_chip_has_a_card_pins_and_keeps_its_url(tab, base):
    page = tab.open(family_url(base, "?block=0"))
    state = part(page, "layers[i].linear_attn.state")
    state.hover()
    c = card(page)
    assert c.is_visible() and "state" in c.inner_text()
    state.click()
    assert state.get_attribute("aria-pressed") == "true"
    until(page, "decodeURIComponent(location.search).includes('part=layers[i].linear_attn.state')")
    again = tab.open(page.url)
    assert part(again, "layers[i].linear_attn.state").get_attribute("aria-pressed") == "true"
    # its support row lights the chip back
    again.keyboard.press("Escape")
    # (its host's fold opened first, as a reader would)
    again.locator('details.nc-host-fold:has(tr[data-path="model.layers[i].linear_attn.betas"]) > summary').first.click()
    again.locator('tr[data-path="model.layers[i].linear_attn.betas"]').first.hover()
    assert "nc-linked" in part(again, "layers[i].linear_attn.betas").get_attribute("class")
    assert not tab.errors


def test_a_chip_lights_its_arcs_and_their_other_ends(tab, base, site_facts):
    kind = next(k for k in site_facts["stack"]["block_kinds"] if k["kind"] == "full_attention")
    page = tab.open(family_url(base, f"?block={site_facts['stack']['blocks'].index('full_attention')}"))
    chip = part(page, "layers[i].mlp.mlp_output")
    chip.hover()
    lit = page.eval_on_selector_all(".nc-block-figure.nc-current .nc-edge.nc-lit",
                                    "els => els.map(e => [e.dataset.from, e.dataset.to])")
    row = "model.layers[i].mlp.mlp_output"
    ends = {(b if a == row else a)[len("model."):] for a, b in kind["dataflow"] if row in (a, b)}
    assert len(lit) == len(ends) == 3  # routed + shared feed it, it feeds layer_output
    others = page.eval_on_selector_all(".nc-block-figure.nc-current .nc-chip.nc-lit", "els => els.map(e => e.dataset.path)")
    assert set(others) == ends
    page.mouse.move(0, 0)
    assert not page.eval_on_selector_all(".nc-edge.nc-lit", "els => els.length")
    assert not tab.errors


def test_a_vision_chip_has_the_vision_card(tab, base):
    page = tab.open(family_url(base))
    chip = part(page, "vision.layers[i].self_attn.attention_head_outputs")
    chip.scroll_into_view_if_needed()
    chip.hover()
    c = card(page, "vision")
    assert c.is_visible() and "attention_head_outputs" in c.inner_text()
    assert not tab.errors


def test_the_inside_scrolls_in_its_own_box_at_375_px(browser, base):
    context = browser.new_context(viewport={"width": 375, "height": 800})
    page = context.new_page()
    page.goto(family_url(base, "?block=0"))
    until(page, "window.__nncanonReady !== undefined")
    boxes = page.eval_on_selector_all(".nc-block-figure.nc-current .nc-interior-scroll, #block-vision .nc-interior-scroll",
                                      "els => els.map(e => [e.getBoundingClientRect().right, e.tabIndex])")
    assert len(boxes) == 2 and all(right <= 375 and tab == 0 for right, tab in boxes)
    # the chips keep their size (12px text), not shrunk to fit
    sizes = page.eval_on_selector_all(".nc-block-figure.nc-current .nc-chip-label",
                                      "els => els.map(e => e.getBoundingClientRect().height)")
    assert sizes and min(sizes) >= 11
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    context.close()


@pytest.mark.parametrize("width", [1440, 375])
def test_a_chips_card_sits_by_the_chip_not_under_the_tall_figure(browser, base, width):
    """Beside the inside's column at the chip's height when the page has room, else just under the chip; never
    over the chip itself."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(family_url(base, "?block=0"))
    until(page, "window.__nncanonReady !== undefined")
    chip = part(page, "layers[i].linear_attn.attention_queries")
    chip.scroll_into_view_if_needed()
    chip.hover()
    c, r = card(page).bounding_box(), chip.bounding_box()
    column = page.locator(".nc-block-figure.nc-current .nc-dataflow").bounding_box()
    if width == 1440:
        assert c["x"] >= column["x"] + column["width"] and abs(c["y"] - r["y"]) < 2
    else:
        assert 0 <= c["y"] - (r["y"] + r["height"]) < 8
    assert 0 <= c["y"] and c["y"] + 40 < 900  # on screen
    context.close()
