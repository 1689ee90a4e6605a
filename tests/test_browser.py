"""The family page in real Chromium: the interactive diagrams, linked views, links and accessibility.

Drives Debian's chromium (``/usr/bin/chromium``) through the ``playwright`` package, on the site
tests/browser_site.py builds once per session (its fixtures are in tests/conftest.py).

Screenshots of the diagram in each block kind (and the vision block, dark, and phone width) go
to build/screenshots/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from browser_site import (
    EVIL,
    FAMILY,
    ROOT,
    Tab,
    card,
    family_url,
    fetch,
    html_pages,
    open_instant,
    part,
    serious_axe_violations,
    settled,
    until,
)
from limits import HANG

SHOTS = ROOT / "build" / "screenshots"

# Without chromium these are skipped, said loudly at the end of the run, and under CI (``$CI``)
# they fail instead: tests/conftest.py, pytest_runtest_setup.
pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="session")
def facts(site_facts) -> dict:
    return site_facts


# ---------------------------------------------------------------- helpers


def visible_parts(page) -> list[str]:
    return page.eval_on_selector_all(
        ".nc-blocks .nc-part:not(.nc-chip)",  # the residual row's parts (the chips: test_browser_interiors.py)
        "els => els.filter(e => e.getBoundingClientRect().width > 0).map(e => e.dataset.path)",
    )


def current_kind(page) -> str:
    return page.eval_on_selector(".nc-blocks > .nc-block-figure.nc-current", "e => e.dataset.kind")


def value(facts: dict, host: str, name: str) -> dict:
    return next(v for h in facts["hosts"] if h["path"] == host for v in h["values"] if v["name"] == name)


def first_block(facts: dict, kind: str) -> int:
    return facts["stack"]["blocks"].index(kind)


def wait_url(page, *needles: str, absent: tuple[str, ...] = ()):
    until(
        page,
        "([yes, no]) => yes.every(s => decodeURIComponent(location.search).includes(s))"
        " && no.every(s => !decodeURIComponent(location.search).includes(s))",
        arg=[list(needles), list(absent)],
    )


# ---------------------------------------------------------------- hover, focus, pin


def test_hover_shows_the_parts_card_from_the_facts(tab, base, facts):
    page = tab.open(family_url(base))
    assert not card(page).is_visible()
    router = part(page, "layers[i].mlp.router")
    router.hover()
    c = card(page)
    assert c.is_visible()
    # the card lands under the part, at most just under the block's own drawing (not under the block's inside and
    # equations, screens down), and starts in the window
    drawing = page.locator(".nc-block-figure.nc-current .nc-scroll:visible").first.bounding_box()
    box, at, height = c.bounding_box(), router.bounding_box(), page.viewport_size["height"]
    assert at["y"] + at["height"] <= box["y"] <= drawing["y"] + drawing["height"] + 40, (at, drawing, box)
    assert box["y"] < height, f"the card starts at y={box['y']}, below the {height} px window"
    text = c.inner_text()
    v = value(facts, "model.layers[i].mlp", "router_logits")
    assert "router" in text and "layers[0].mlp.router" in text
    assert "model.layers[0].mlp.router_logits" in text  # the standard name, at the block picked
    assert v["layout"] in text and f"[{' '.join(v['dims'])}]" in text
    assert v["description"] in text and v["read_at"] in text
    assert "tiny [" in text
    # the ⚠︎ condition, its text shown as text (the facts' HTML never becomes markup)
    assert f"⚠︎ needs {v['conditions'][0]['needs']}: {EVIL}" in text
    assert c.locator("img").count() == 0
    assert page.evaluate("window.__pwned") is None
    # a part without a condition has no ⚠︎ line; leaving the part hides the card
    part(page, "layers[i].mlp.experts").hover()
    assert "routed_output" in c.inner_text() and "⚠︎" not in c.inner_text()
    page.mouse.move(2, 2)
    assert not c.is_visible()


def test_parts_are_focusable_buttons_with_names(tab, base, facts):
    page = tab.open(family_url(base))
    parts = page.eval_on_selector_all(
        ".nc-part",
        "els => els.map(e => [e.getAttribute('tabindex'), e.getAttribute('role'), e.getAttribute('aria-label'),"
        " e.dataset.path, e.querySelectorAll('.nc-part').length])",
    )
    drawn = {p["id"] for k in facts["stack"]["block_kinds"] for p in k["parts"]}
    drawn |= {p["id"] for p in facts["vision"]["parts"]}
    assert drawn <= {p[3] for p in parts}
    for tabindex, role, label, path, nested in parts:
        assert (tabindex, role, nested) == ("0", "button", 0), path
        assert label and path in label
    # keyboard focus shows the card; Enter pins it, Escape unpins and hides it
    router = part(page, "layers[i].mlp.router")
    router.focus()
    c = card(page)
    assert c.is_visible() and "router_logits" in c.inner_text()
    assert router.get_attribute("aria-describedby") == "nc-card-text"
    page.keyboard.press("Enter")
    assert router.get_attribute("aria-pressed") == "true" and "pinned" in c.inner_text()
    page.keyboard.press("Escape")
    assert router.get_attribute("aria-pressed") == "false" and not c.is_visible()
    page.keyboard.press(" ")  # Space pins too, and does not scroll the page
    assert router.get_attribute("aria-pressed") == "true"
    page.keyboard.press("Space")
    assert router.get_attribute("aria-pressed") == "false"


def test_click_pins_the_card_and_escape_unpins(tab, base):
    page = tab.open(family_url(base))
    mixer = part(page, "layers[i].linear_attn")
    mixer.click()
    c = card(page)
    assert mixer.get_attribute("aria-pressed") == "true"
    assert "nc-pinned" in mixer.get_attribute("class")
    page.mouse.move(2, 2)  # the pinned card stays when the mouse leaves
    assert c.is_visible() and "linear_attn.attention_output" in c.inner_text() and "pinned" in c.inner_text()
    part(page, "layers[i].input_layernorm").hover()  # hovering another part previews it
    assert "attention_norm_output" in c.inner_text()
    page.mouse.move(2, 2)  # and leaving it brings the pinned card back
    assert "linear_attn.attention_output" in c.inner_text()
    mixer.click()  # a second click unpins
    assert mixer.get_attribute("aria-pressed") == "false"
    mixer.click()
    page.keyboard.press("Escape")
    assert mixer.get_attribute("aria-pressed") == "false" and not c.is_visible()
    wait_url(page, absent=("part=",))


# ---------------------------------------------------------------- the slider


def _tick_centre(page, i: int) -> tuple[float, float]:
    page.locator(".nc-track").scroll_into_view_if_needed()
    box = page.locator(f'.nc-tick[data-block="{i}"]').bounding_box()
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def test_slider_by_mouse_and_keyboard(tab, base, facts):
    page = tab.open(family_url(base))
    slider = page.locator(".nc-slider")
    n = facts["stack"]["num_layers"]
    assert (slider.get_attribute("min"), slider.get_attribute("max")) == ("0", str(n - 1))
    # a click on a tick picks its block: the ticks sit where the thumb does for their value
    for i in (0, 3, 7, 20, n - 1):
        page.mouse.click(*_tick_centre(page, i))
        assert slider.input_value() == str(i), i
        assert page.locator(".nc-pick-i").inner_text() == f"i = {i}"
        assert current_kind(page) == facts["stack"]["blocks"][i]
    # dragging the thumb
    page.mouse.move(*_tick_centre(page, 2))
    page.mouse.down()
    page.mouse.move(*_tick_centre(page, 11), steps=8)
    page.mouse.up()
    assert slider.input_value() == "11" and current_kind(page) == facts["stack"]["blocks"][11]
    # arrow keys, Home and End
    slider.focus()
    page.keyboard.press("ArrowRight")
    assert slider.input_value() == "12"
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert slider.input_value() == "10"
    page.keyboard.press("End")
    assert slider.input_value() == str(n - 1)
    page.keyboard.press("Home")
    assert slider.input_value() == "0"
    page.keyboard.press("ArrowUp")
    assert slider.input_value() == "1"
    kind = next(k for k in facts["stack"]["block_kinds"] if k["kind"] == facts["stack"]["blocks"][1])
    assert slider.get_attribute("aria-valuetext") == f"layers[1], {kind['label']} ({kind['kind']})"


def test_diagram_redraws_per_block_kind_with_its_relations(tab, base, facts):
    page = tab.open(family_url(base))
    SHOTS.mkdir(parents=True, exist_ok=True)
    slider = page.locator(".nc-slider")
    kinds = facts["stack"]["block_kinds"]
    assert len({k["kind"] for k in kinds}) >= 2
    for k in kinds:
        i = first_block(facts, k["kind"])
        slider.focus()
        page.keyboard.press("Home")
        for _ in range(i):
            page.keyboard.press("ArrowRight")
        assert slider.input_value() == str(i)
        assert current_kind(page) == k["kind"]
        # only this kind's diagram is drawn, with exactly its parts
        assert sorted(visible_parts(page)) == sorted(p["id"] for p in k["parts"])
        assert page.locator(".nc-blocks > .nc-block-figure:visible").count() == 1
        # the relations under it are this kind's
        relations = page.locator(".nc-blocks > .nc-block-figure.nc-current .nc-identity code")
        assert relations.first.is_visible()
        assert relations.all_inner_texts() == [r["text"] for r in k["relations"]]
        head = page.locator(".nc-pick-kind").inner_text()
        assert k["label"] in head and k["kind"] in head
        assert (
            page.locator(".nc-block-figure.nc-current .nc-stream-label.nc-indexed:visible")
            .text_content()
            .startswith(f"layers[{i}]")
        )
        # the mixer (linear_attn / self_attn) pinned, as the screenshot shows it
        mixer = part(page, f"layers[i].{k['mixer']}")
        mixer.click()
        assert f"layers[{i}].{k['mixer']}.attention_output" in card(page).inner_text()
        page.mouse.move(2, 2)
        _shot_residual(page, SHOTS / f"diagram-{k['kind']}.png")
        page.keyboard.press("Escape")
    # the vision block (no slider: one kind)
    vpart = part(page, "vision.layers[i].self_attn")
    vpart.click()
    assert "model.vision.layers[i].self_attn.attention_output" in card(page, "vision").inner_text()
    page.mouse.move(2, 2)
    _shot_between(page, "#nc-vision-chain", "#nc-card-vision", SHOTS / "diagram-vision.png")


def _shot_between(page, first: str, last: str, path: Path):
    """A full-width screenshot from `first`'s top to the lowest of `last` and the current block figure,
    without Material's fixed header and back-to-top button over it."""
    page.add_style_tag(content=".md-header, .md-top { visibility: hidden !important; }")
    page.locator(first).scroll_into_view_if_needed()
    scroll = page.evaluate("scrollY")
    top = page.locator(first).bounding_box()["y"]
    bottom = top
    for sel in (last, ".nc-blocks > .nc-block-figure.nc-current"):
        loc = page.locator(sel)
        if loc.is_visible() and (sel == last or first == ".nc-picker"):
            b = loc.bounding_box()
            bottom = max(bottom, b["y"] + b["height"])
    clip = {"x": 0, "y": scroll + top - 8, "width": page.viewport_size["width"], "height": bottom - top + 16}
    page.screenshot(path=str(path), full_page=True, clip=clip)


def _shot_residual(page, path: Path):
    """The picker, the block diagram with its identity line, and the card under them."""
    _shot_between(page, ".nc-picker", "#nc-card-text", path)


def test_tick_colours_match_the_facts(tab, base, facts):
    page = tab.open(family_url(base))
    blocks = facts["stack"]["blocks"]
    ticks = page.eval_on_selector_all(
        ".nc-tick",
        "els => els.map(e => [+e.dataset.block, e.dataset.kind, getComputedStyle(e).backgroundColor])",
    )
    assert [t[0] for t in ticks] == list(range(len(blocks)))
    assert [t[1] for t in ticks] == blocks
    legend = dict(
        page.eval_on_selector_all(
            ".nc-legend .nc-key",
            "els => els.map(e => [e.dataset.kind, getComputedStyle(e.querySelector('.nc-swatch')).backgroundColor])",
        )
    )
    assert set(legend) == {k["kind"] for k in facts["stack"]["block_kinds"]}
    assert len(set(legend.values())) == len(legend), "two kinds share a color"
    for i, kind, colour in ticks:
        assert colour == legend[kind], (i, kind, colour)
    # every block kind's count in the legend is the facts'
    legend_text = page.locator(".nc-legend").inner_text()
    for k in facts["stack"]["block_kinds"]:
        assert f"{k['label']} {k['kind']} × {blocks.count(k['kind'])}" in legend_text


# ---------------------------------------------------------------- the URL


def test_url_keeps_the_block_and_the_pinned_part(tab, base, browser, facts):
    page = tab.open(family_url(base))
    slider = page.locator(".nc-slider")
    slider.focus()
    for _ in range(7):
        page.keyboard.press("ArrowRight")
    part(page, "layers[i].mlp.router").click()
    wait_url(page, "block=7", "part=layers[i].mlp.router")
    assert "part=layers[i].mlp.router" in page.url  # readable: brackets unescaped
    url = page.url

    # a fresh tab on that link opens in that state
    other = Tab(browser.new_page(viewport={"width": 1280, "height": 900}))
    p2 = other.open(url)
    assert p2.locator(".nc-slider").input_value() == "7"
    assert current_kind(p2) == facts["stack"]["blocks"][7]
    router = part(p2, "layers[i].mlp.router")
    assert router.get_attribute("aria-pressed") == "true"
    assert card(p2).is_visible() and "model.layers[7].mlp.router_logits" in card(p2).inner_text()
    # a pinned part that the new block's kind also has stays pinned; one it lacks unpins
    p2.locator(".nc-slider").focus()
    p2.keyboard.press("ArrowLeft")  # block 6: the other kind, which has a router too
    assert current_kind(p2) != facts["stack"]["blocks"][7]
    assert part(p2, "layers[i].mlp.router").get_attribute("aria-pressed") == "true"
    wait_url(p2, "block=6", "part=layers[i].mlp.router")
    part(p2, "layers[i].linear_attn").click()
    p2.locator(".nc-slider").focus()
    p2.keyboard.press("ArrowRight")  # block 7: attention, no linear_attn
    wait_url(p2, "block=7", absent=("part=",))
    assert p2.locator(".nc-part.nc-pinned").count() == 0
    p2.context.close()
    assert not other.errors, other.errors

    # a vision part round-trips as well, and reload keeps the state
    page.goto(family_url(base, "?part=vision.layers[i].mlp"))
    until(page, "window.__nncanonReady !== undefined")
    assert part(page, "vision.layers[i].mlp").get_attribute("aria-pressed") == "true"
    assert card(page, "vision").is_visible() and not card(page).is_visible()
    page.reload()
    until(page, "window.__nncanonReady !== undefined")
    assert part(page, "vision.layers[i].mlp").get_attribute("aria-pressed") == "true"


# ---------------------------------------------------------------- linked views


def lit(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.dataset.path)")


def test_linked_highlighting_both_ways(tab, base, facts):
    page = tab.open(family_url(base, "?block=7"))
    # a part lights its value's row and its printout lines, of the block picked only
    part(page, "layers[i].mlp.router").hover()
    assert lit(page, "tr.nc-lit-main") == ["model.layers[i].mlp.router_logits"]
    lines = page.eval_on_selector_all(
        "pre.nc-printout .line.nc-lit", "els => els.map(e => [e.dataset.path, e.textContent.trim()])"
    )
    assert sorted(p for p, _ in lines) == ["model.layers[i].mlp.router", "model.layers[i].mlp.router_logits"]
    group = page.evaluate(
        """() => {
          const line = document.querySelector('pre.nc-printout .line.nc-lit');
          let n = line, indent = line.textContent.search(/\\S/);
          while ((n = n.previousElementSibling)) {
            const i = n.textContent.search(/\\S/);
            if (i < indent && n.dataset.layers) return n.dataset.layers;
            if (i < indent) indent = i;
          }
        }"""
    )
    assert group == "7"
    # a module part lights every row of its host too
    part(page, "layers[i].self_attn").hover()
    assert lit(page, "tr.nc-lit-main") == ["model.layers[i].self_attn.attention_output"]
    assert "model.layers[i].self_attn.attention_queries" in lit(page, "tr.nc-lit")
    page.mouse.move(2, 2)
    assert lit(page, "tr.nc-lit") == [] and lit(page, ".line.nc-lit") == []

    # a row lights its part (its host's fold opened first, as a reader would)
    page.locator("button.nc-fold-all").first.click()
    page.locator('tr[data-path="model.layers[i].mlp.routed_output"]').hover()
    assert lit(page, ".nc-part.nc-linked") == ["layers[i].mlp.experts", "layers[i].mlp.routed_output"]
    page.locator('tr[data-path="model.layers[i].self_attn.attention_keys"]').hover()
    assert lit(page, ".nc-part.nc-linked") == ["layers[i].self_attn.attention_keys"]  # its chip, the value itself
    page.locator('tr[data-path="model.token_embeddings"]').hover()
    assert lit(page, ".nc-part.nc-linked") == ["embed_tokens"]
    page.mouse.move(2, 2)
    assert lit(page, ".nc-part.nc-linked") == []
    # and so does a printout line
    page.locator('pre.nc-printout .line[data-path="model.layers[i].mlp.router"]').first.hover()
    assert lit(page, ".nc-part.nc-linked") == ["layers[i].mlp.router"]
    page.locator('pre.nc-printout .line[data-path="model.vision.layers[i].self_attn"]').first.hover()
    # the module's part, and the chips of the values its host holds (the vision block's inside)
    chips = [r[len("model."):] for r in facts["vision"]["sequence"] if r.startswith("model.vision.layers[i].self_attn.")]
    assert lit(page, ".nc-part.nc-linked") == ["vision.layers[i].self_attn", *chips] and len(chips) == 6


# ---------------------------------------------------------------- instant navigation, schemes, phones


def test_works_after_instant_navigation(tab, base):
    page = open_instant(tab, f"{base}/families/")
    page.evaluate("window.__sameDocument = true")
    page.click(f'article a[href*="{FAMILY}"]')
    until(page, "!!document.getElementById('nc-data') && window.__nncanonReady !== undefined")
    assert page.evaluate("window.__sameDocument") is True, "Material did a full load, not an instant one"
    for _ in range(2):  # away and back: the page's state is rebuilt, the listeners are not doubled
        router = part(page, "layers[i].mlp.router")
        router.click()  # one click pins once (a doubled listener would pin and unpin)
        assert router.get_attribute("aria-pressed") == "true" and card(page).is_visible()
        page.locator(".nc-slider").focus()
        page.keyboard.press("ArrowRight")
        assert page.locator(".nc-pick-i").inner_text() == "i = 1"
        wait_url(page, "block=1", "part=layers[i].mlp.router")
        page.click("header a.md-logo")
        until(page, "!document.getElementById('nc-data')")
        page.go_back()  # the link it left restores the block and the pinned part
        until(page, "!!document.getElementById('nc-data')")
        until(page, "document.querySelector('.nc-pick-i').textContent === 'i = 1'")
        assert part(page, "layers[i].mlp.router").get_attribute("aria-pressed") == "true"
        page.keyboard.press("Escape")
        page.locator(".nc-slider").focus()
        page.keyboard.press("Home")
        wait_url(page, absent=("block=", "part="))
    assert page.evaluate("window.__sameDocument") is True


def test_dark_scheme_and_phone_width(browser, base):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(
        viewport={"width": 375, "height": 812}, color_scheme="dark", has_touch=False
    )
    t = Tab(context.new_page())
    page = t.open(family_url(base, "?block=3"))
    assert page.evaluate("document.body.dataset.mdColorScheme") == "slate"
    # no horizontal page overflow; the block is the narrow drawing (a sublayer per row), whole at full size: no
    # sideways scroll, no label under 12 px, and no "scroll it" hint
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    figure = ".nc-blocks > .nc-block-figure.nc-current"
    assert not page.locator(f"{figure} .nc-wide").is_visible()
    scroller = page.locator(f"{figure} .nc-narrow")
    assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    # the labels' size on screen: their font size times the drawing's scale (its width on screen / its viewBox's)
    shown = scroller.evaluate("e => { const s = e.querySelector('svg'); const t = s.querySelector('text');"
                              " return parseFloat(getComputedStyle(t).fontSize) * s.getBoundingClientRect().width"
                              " / s.viewBox.baseVal.width; }")
    assert shown >= 12, shown
    assert not scroller.locator(".nc-scroll-hint").is_visible()
    # the stack's chain (embeddings ... lm_head, logits) is wider than a phone: it says so, and scrolls to its end
    chain = page.locator(".nc-figure .nc-scroll:has(#nc-stack-chain)")
    assert chain.evaluate("e => e.scrollWidth > e.clientWidth + 1")
    assert chain.locator(".nc-scroll-hint").is_visible()
    # the slider still picks every block; the card fits the screen
    page.mouse.click(*_tick_centre(page, 39))
    assert page.locator(".nc-slider").input_value() == "39"
    page.mouse.click(*_tick_centre(page, 3))
    mixer = part(page, "layers[i].self_attn")
    mixer.click()
    box = card(page).bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 375
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.mouse.move(1, 1)
    _shot_residual(page, SHOTS / "diagram-full_attention-phone-dark.png")
    context.close()
    assert not t.errors, t.errors
    # dark at desktop width too
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    t = Tab(context.new_page())
    page = t.open(family_url(base, "?block=0&part=layers[i].mlp.shared_experts"))
    page.mouse.move(1, 1)
    _shot_residual(page, SHOTS / "diagram-linear_attention-dark.png")
    context.close()
    assert not t.errors, t.errors


# ---------------------------------------------------------------- every page: links, console, axe


def test_every_internal_link_and_anchor_resolves(crawl, base):
    pages = [u for u, (_, ids, _) in crawl.items() if ids]
    assert f"{base}/families/{FAMILY}/" in pages and f"{base}/concepts/" in pages
    bad = []
    for url, (_, _, links) in crawl.items():
        for link in links:
            target, frag = urldefrag(link)
            if not target.startswith(base):
                continue
            status, ids, _ = crawl[target]
            if status != 200:
                bad.append(f"{url} -> {link}: HTTP {status}")
            elif frag and frag not in ids and urlsplit(target).path.endswith("/"):
                bad.append(f"{url} -> {link}: no #{frag}")
    assert not bad, "\n".join(bad)


def test_no_console_errors_and_no_serious_axe_violations_on_any_page(browser, crawl, base):
    """Every page at 1440 px dark, the family page with a card pinned and every folded host open (axe audits each
    scheme and each screen once: tests/test_browser_mobile.py's SWEEPS audits 375 px light, and checks overflow,
    broken names and small text at 375 px in both schemes and 1440 px light)."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    pages = html_pages(crawl, base)
    assert len(pages) >= 6
    contexts = {
        scheme: browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=scheme)
        for scheme in ("dark",)
    }
    problems, audited = [], []
    for url in pages:
        for scheme, context in contexts.items():
            t = Tab(context.new_page())
            page = t.open(url)
            if page.locator("#nc-data").count():
                part(page, "layers[i].mlp.router").click()  # with a card open, too
                # and every folded host opened by its section's button, so its tables are audited too
                page.locator("button.nc-fold-all").evaluate_all("bs => bs.forEach(b => b.click())")
                settled(page)
            problems += [f"{scheme} {url}: {v}" for v in serious_axe_violations(axe, page)]
            problems += [f"{scheme} {url}: {e}" for e in t.errors]
            audited.append((scheme, url))
            page.close()
    for context in contexts.values():
        context.close()
    assert not problems, "\n".join(problems)
    assert ("dark", family_url(base)) in audited


def test_the_axe_audit_reports_a_planted_violation_of_each_kind_it_looks_for(tab, base):
    """The audit above is alive: text too faint to read and a button with no name, planted on a page, come back
    as serious violations naming their nodes (with passes trimmed to one node each, tests/browser_site.py)."""
    from axe_playwright_python.sync_playwright import Axe

    page = tab.open(f"{base}/getting-started/")
    page.evaluate("""() => document.querySelector('article').insertAdjacentHTML('beforeend',
        '<p id="faint" style="color:#ddd;background:#fff">faint words</p><button id="nameless"></button>')""")
    found = serious_axe_violations(Axe(), page)
    assert any(v.startswith("serious color-contrast") and "#faint" in v for v in found), found
    assert any(v.startswith("critical button-name") and "#nameless" in v for v in found), found


def test_the_diagrams_data_is_the_json_file_the_page_names(base, facts):
    """The page carries no data of its own (issue 52: it was a sixth of the flagship's bytes): its script fetches
    facts/<family>.diagram.json, which holds what the cards say, hostile text included, as plain JSON."""
    status, _, body = fetch(family_url(base))
    assert status == 200
    m = re.search(r'<div class="nc-data" id="nc-data" hidden data-src="([^"]*)"></div>', body)
    assert m, "the page names no diagram data"
    assert m.group(1) == f"../../facts/{facts['family']}.diagram.json" and EVIL not in body.split("<article", 1)[0]
    import urllib.request

    with urllib.request.urlopen(urljoin(family_url(base), m.group(1)), timeout=HANG) as r:
        assert r.status == 200
        data = json.loads(r.read().decode("utf-8"))
    v = data["values"]["model.layers[i].mlp.router_logits"]
    assert v["conditions"][0]["why"] == EVIL
    assert data["blocks"] == facts["stack"]["blocks"]
    for k in facts["stack"]["block_kinds"]:
        drawn = {p["path"] for p in data["parts"].values() if p["kind"] == k["kind"]}
        assert drawn == {p["id"] for p in k["parts"]} | {row[len("model."):] for row in k["sequence"]}


def test_walking_a_block_part_by_part_no_card_covers_the_next_part(tab, base):
    """issue 52: at 1440 × 900 the card of post_attention_layernorm lay over mlp, so moving right to the next part
    landed on the card. Every part of the drawing in order, with the part near the window's bottom (the space
    under the figure off screen) and near its top: its card is in the window and does not cover the next part (the
    card may go above the part's row, over the parts already walked)."""
    page = tab.open(family_url(base, "?block=3"))
    page.set_viewport_size({"width": 1440, "height": 900})
    drawing = ".nc-block-figure.nc-current .nc-scroll .nc-part"
    paths = page.eval_on_selector_all(drawing, "ps => ps.filter(p => p.getClientRects().length).map(p => p.dataset.path)")
    assert len(paths) >= 5, paths
    rect = "e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom] }"
    problems = []
    for i, path in enumerate(paths):
        here = part(page, path)
        for where in ("bottom", "top"):
            page.mouse.move(1, 1)
            shift = ("p => scrollBy(0, p.getBoundingClientRect().bottom - innerHeight + 20)" if where == "bottom"
                     else "p => scrollBy(0, p.getBoundingClientRect().top - 80)")
            here.evaluate(shift)
            here.hover(position={"x": 4, "y": 4})  # a corner: a part drawn inside (mlp's router) has the centre
            until(page, "() => !document.getElementById('nc-card-text').hidden", what=f"the card of {path}")
            settled_card = card(page).evaluate(rect)
            if not (0 <= settled_card[1] < 900):
                problems.append(f"{path} near the window's {where}: its card starts at y={settled_card[1]:.0f}")
            following = paths[i + 1] if i + 1 < len(paths) else None
            if following is None or following.startswith(path + "."):
                continue  # the last part, or a part drawn inside this one (the mixture's router in mlp)
            other = part(page, following).evaluate(rect)
            if (settled_card[0] < other[2] and other[0] < settled_card[2] and settled_card[1] < other[3]
                    and other[1] < settled_card[3]):
                problems.append(f"{path} near the window's {where}: its card covers the next part, {following}")
    assert not problems, "\n".join(problems)


def test_the_keyboard_reaches_the_diagram_in_a_few_tabs(tab, base):
    """Material's "Skip to content", then the page's jump link: the block diagram's first part is a handful of Tabs
    from the top, not the 168 it took behind the cheat sheet's 73 links."""
    page = tab.open(family_url(base))
    presses = 0

    def tab_until(expression: str, limit: int) -> None:
        nonlocal presses
        for _ in range(limit):
            page.keyboard.press("Tab")
            presses += 1
            if page.evaluate(f"(() => {{ const e = document.activeElement; return !!e && ({expression}); }})()"):
                return
        raise AssertionError(f"{limit} Tabs did not reach {expression}: " + page.evaluate(
            "document.activeElement.outerHTML.slice(0, 200)"))

    def follow() -> None:
        """Enter on the focused link, then wait for its jump to land (Material's instant navigation handles a
        same-page link in a script of its own: under load, Tabs pressed before it lands start from the link)."""
        target = page.evaluate("new URL(document.activeElement.href).hash")
        page.keyboard.press("Enter")
        until(page, f"location.hash === {json.dumps(target)}", what=f"the link's jump to {target}")
        settled(page)

    tab_until("e.classList.contains('md-skip')", 3)
    follow()
    tab_until("e.matches('.nc-jump a[href$=\"#the-residual-stream\"]')", 6)
    follow()
    tab_until("!!e.closest('.nc-figure')", 6)
    assert presses <= 12, presses
