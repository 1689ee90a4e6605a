"""The site on every screen, in real Chromium: a phone, a desktop, both schemes, and paper.

On the site tests/browser_site.py builds (fixtures in tests/conftest.py): every page at 375 px
(as a touch screen) and 1440 px, light and dark, has no horizontal page overflow, no standard name
broken mid-identifier and no serious or critical axe violation; print emulation shows every block
kind and every printout line and no controls; the diagram's card links to its value's support row
and its printout line, and a URL's state scrolls its part into view.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading

import pytest
from browser_site import Tab, card, family_url, html_pages, part, serious_axe_violations, settled, until

pytestmark = [pytest.mark.browser]

PHONE = {"viewport": {"width": 375, "height": 812}, "has_touch": True, "is_mobile": True}
DESKTOP = {"viewport": {"width": 1440, "height": 900}}

# Where the page shows a standard name (a value, a host's path, a family): the elements measured.
NAMES = (
    ".nc-host td.nc-name code, .nc-host th.nc-host-name code, .nc-relations-all td:first-child > code,"
    " details.nc-fold > summary code, .nc-weights code.nc-wname,"
    " .nc-card code, table.nc-families td:first-child a"
)

# Each name's characters, located one by one: a character that starts a new line must be "." or "["
# (the only places a name may wrap). Returns the names broken elsewhere, with the character.
BROKEN_NAMES = """sel => {
  const bad = [];
  const range = document.createRange();
  for (const e of document.querySelectorAll(sel)) {
    if (!e.getClientRects().length) continue;
    const walk = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    let top = null, node;
    while ((node = walk.nextNode())) {
      for (let i = 0; i < node.length; i++) {
        const ch = node.data[i];
        if (/\\s/.test(ch)) continue;
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const r = range.getBoundingClientRect();
        if (!r.width && !r.height) continue;
        if (top !== null && r.top > top + r.height / 2 && ch !== "." && ch !== "[") {
          bad.push(e.textContent.trim() + " (before " + JSON.stringify(ch) + ")");
        }
        top = r.top;
      }
    }
  }
  return bad;
}"""


#: visible text drawn under 12 px, by element and size (SVG text is the drawings', checked at its rendered size by
#: tests/test_site_index.py)
SMALL_TEXT = """() => { const out = {}; const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (w.nextNode()) {
    const e = w.currentNode.parentElement;
    if (!w.currentNode.textContent.trim() || !e || !e.getClientRects().length || e.closest('svg')) continue;
    const style = getComputedStyle(e), px = parseFloat(style.fontSize);
    if (style.visibility !== 'hidden' && px < 12) {
      const key = `${e.tagName.toLowerCase()}${[...e.classList].map(c => '.' + c).join('')} at ${px} px`;
      out[key] = (out[key] || 0) + 1;
    }
  }
  return Object.entries(out).map(([k, n]) => `${n} × ${k}`); }"""


def _problems_on(page, width: int, axe=None) -> list[str]:
    out = [f"text under 12 px: {t}" for t in page.evaluate(SMALL_TEXT)]
    overflow = page.evaluate("document.documentElement.scrollWidth")
    if overflow > width:
        out.append(f"the page is {overflow} px wide")
    out += [f"broken name: {b}" for b in page.evaluate(BROKEN_NAMES, NAMES)]
    out += [f"axe {v}" for v in (serious_axe_violations(axe, page) if axe else [])]
    return out


#: (screen, scheme, axe audit): every page at each; axe audits each scheme on every page once and each screen once,
#: here light on the touch screen, and tests/test_browser.py dark at 1440 px (both with every folded host open):
#: what axe finds depends on the colours (the scheme) and the layout (the screen), and its run is most of a sweep's
#: time (~7 s of ~20 on the family page alone)
SWEEPS = [("375", "light", True), ("375", "dark", False), ("1440", "light", False)]


@pytest.mark.parametrize("screen,scheme,audit", SWEEPS, ids=[f"{w}-{s}{'-axe' if a else ''}" for w, s, a in SWEEPS])
def test_every_page_on_a_phone_and_a_desktop(browser, crawl, base, screen, scheme, audit):
    """No horizontal overflow, no name broken mid-identifier and no text under 12 px on every page at 375 px (a touch
    screen), light and dark, and at 1440 px light: one test per screen and scheme; and no serious or critical axe
    violation where :data:`SWEEPS` audits. The family page is measured with a part's card pinned and every folded
    host open."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe() if audit else None
    pages = html_pages(crawl, base)
    assert family_url(base) in pages and f"{base}/families/" in pages
    problems = []
    opts = PHONE if screen == "375" else DESKTOP
    width = opts["viewport"]["width"]
    context = browser.new_context(color_scheme=scheme, **opts)
    for url in pages:
        t = Tab(context.new_page())
        page = t.open(url)
        if page.locator("#nc-data").count():
            part(page, "layers[i].mlp.router").click()
            # every folded host opened by its section's button, so its tables are measured too
            page.locator("button.nc-fold-all").evaluate_all("bs => bs.forEach(b => b.click())")
        settled(page)  # the scroll boxes are made focusable after Material's layout, a frame later
        # and once more now, however late a loaded machine laid the page out: the page's own pass, as on a resize
        page.evaluate("() => window.__nncanonReachAll && window.__nncanonReachAll()")
        where = f"{screen} px {scheme} {url}"
        problems += [f"{where}: {p}" for p in _problems_on(page, width, axe)]
        problems += [f"{where}: {e}" for e in t.errors]
        page.close()
    context.close()
    assert not problems, "\n".join(problems)


def test_the_families_index_scrolls_in_its_own_box_on_a_phone(browser, base):
    context = browser.new_context(**PHONE)
    t = Tab(context.new_page())
    page = t.open(f"{base}/families/")
    table = page.locator("table.nc-families")
    scroller = table.evaluate_handle(
        "t => { for (let e = t; e; e = e.parentElement) if (e.scrollWidth > e.clientWidth + 1) return e; }"
    )
    box = scroller.evaluate("e => { const r = e.getBoundingClientRect(); return [r.left, r.right] }")
    # the box that scrolls is the table's own, inside the screen, reached by keyboard, named
    assert scroller.evaluate("e => e.closest('.md-content') !== null && e !== document.documentElement")
    assert box[0] >= 0 and box[1] <= 375
    assert scroller.evaluate("e => e.tabIndex === 0 && !!e.getAttribute('aria-label')")
    # the family names stay put while the other columns scroll
    first = page.locator("table.nc-families tbody td:first-child").first
    x = first.bounding_box()["x"]
    scroller.evaluate("e => { e.scrollLeft = 200 }")
    assert abs(first.bounding_box()["x"] - x) < 1
    context.close()
    assert not t.errors, t.errors


def test_a_table_wider_than_its_box_keeps_its_first_column_on_a_desktop(browser, base):
    """The Coverage page's nine columns are wider than the article at 1440 px: the model type stays in view while
    the other columns scroll (the box is narrowed here so the few fixture rows overflow as the 272 do)."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    t = Tab(context.new_page())
    page = t.open(f"{base}/coverage/")
    box = page.locator(".nc-families-box").first
    box.evaluate("e => { e.style.maxWidth = '420px' }")
    assert box.evaluate("e => e.scrollWidth > e.clientWidth + 100")
    first = page.locator("table.nc-coverage tbody td:first-child").first
    second = page.locator("table.nc-coverage tbody td:nth-child(2)").first
    x, y = first.bounding_box()["x"], second.bounding_box()["x"]
    box.evaluate("e => { e.scrollLeft = 250 }")
    assert abs(first.bounding_box()["x"] - x) < 1 and second.bounding_box()["x"] < y - 100
    # what scrolled under it is covered, not shown through it
    assert first.evaluate("e => getComputedStyle(e).backgroundColor") not in ("rgba(0, 0, 0, 0)", "transparent")
    context.close()
    assert not t.errors, t.errors


def test_touch_screens_get_no_key_hints_and_a_thumb_to_hit(browser, base):
    context = browser.new_context(**PHONE)
    t = Tab(context.new_page())
    page = t.open(family_url(base))
    part(page, "layers[i].mlp.router").click()
    assert card(page).locator(".nc-card-pin").is_visible()
    assert not card(page).locator(".nc-card-esc").is_visible()
    assert not page.locator(".nc-keys").is_visible()
    slider = page.locator(".nc-slider").bounding_box()
    assert slider["height"] >= 24
    thumb = page.locator(".nc-picker").evaluate("e => parseFloat(getComputedStyle(e).getPropertyValue('--t'))")
    assert thumb >= 24
    context.close()
    assert not t.errors, t.errors


@pytest.mark.parametrize("path", ["embed_tokens", "layers[i].mlp.router", "layers[i].post_attention_layernorm",
                                  "layers[i].linear_attn.attention_queries", "lm_head"])
def test_a_tapped_parts_card_is_a_bottom_sheet_in_view_at_once(browser, base, path):
    """On a touch screen the card of any part, in the stack, in the block or inside it, is a sheet along the
    bottom of the window: whole in view at the tap, with no scroll, and its close button unpins it."""
    context = browser.new_context(**PHONE)
    t = Tab(context.new_page())
    page = t.open(family_url(base, "?block=0"))
    target = part(page, path).first
    target.scroll_into_view_if_needed()
    target.tap()
    c = card(page)
    assert c.is_visible()
    box, height = c.bounding_box(), PHONE["viewport"]["height"]
    assert box["x"] == 0 and box["width"] == PHONE["viewport"]["width"]
    assert abs(box["y"] + box["height"] - height) < 1 and box["height"] <= 0.45 * height + 1
    assert c.locator("code.nc-card-path").is_visible()
    close = c.locator(".nc-card-close")
    assert close.bounding_box()["height"] >= 44 and close.get_attribute("aria-label")
    close.tap()
    assert not c.is_visible()
    until(page, "!location.search.includes('part=')", what="the closed card's part to leave the URL")
    context.close()
    assert not t.errors, t.errors


def test_print_shows_every_block_kind_and_the_whole_printout(browser, base, site_facts):
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    t = Tab(context.new_page())
    page = t.open(family_url(base, "?block=3"))
    page.emulate_media(media="print")
    kinds = [k["kind"] for k in site_facts["stack"]["block_kinds"]]
    shown = page.eval_on_selector_all(
        ".nc-blocks > .nc-block-figure",
        "els => els.filter(e => e.getBoundingClientRect().height > 0).map(e => e.dataset.kind)",
    )
    assert shown == kinds
    # the printout does not scroll: every line lies inside its box, and its box on the page
    code = page.locator("pre.nc-printout > code")
    assert code.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    lines = site_facts["printout"]["text"].rstrip("\n").split("\n")
    # every line prints but a repeated block's, which prints as its first line naming the block it repeats
    # (generator/site/printout.py): those left out are exactly the ones its marker covers
    outside = code.evaluate(
        """e => { const b = e.getBoundingClientRect();
                  return [...e.querySelectorAll('.line:not(.nc-repeat)')].filter(l => { const r = l.getBoundingClientRect();
                    return !r.height || r.top < b.top - 1 || r.bottom > b.bottom + 1; }).length }"""
    )
    assert page.locator("pre.nc-printout .line").count() == len(lines) and outside == 0
    from generator.site.printout import printout_lines

    rows = printout_lines(site_facts["printout"]["text"])
    hidden = code.evaluate("e => [...e.querySelectorAll('.line')].map(l => l.getBoundingClientRect().height === 0)")
    assert hidden == [bool(r["repeat"]) for r in rows]
    same = page.locator("pre.nc-printout .nc-same")
    assert same.count() == sum(1 for r in rows if r["same"]) and (same.count() == 0 or same.first.is_visible())
    # no controls
    for sel in (".nc-picker", ".md-header", ".md-sidebar--primary", ".md-search", ".md-footer"):
        assert not page.locator(sel).first.is_visible(), sel
    # collapsed sections print open
    assert page.locator("details.nc-identities table").first.evaluate("e => e.getBoundingClientRect().height > 0")
    assert page.pdf()[:4] == b"%PDF"
    context.close()
    assert not t.errors, t.errors


def test_the_page_prints_on_at_most_40_a4_pages_none_half_blank(browser, base):
    """The longest family page (two block kinds, a vision encoder, 40 blocks) on A4, every section open: at most
    40 pages, and no page but the last more than half blank (a block kept whole must not push a page's rest away).
    A page's fill is read from the PDF itself (tests/pdf_pages.py): how far down its printable area text is set."""
    from pdf_pages import page_fills

    context = browser.new_context(viewport={"width": 1000, "height": 900})
    t = Tab(context.new_page())
    page = t.open(family_url(base))
    page.emulate_media(media="print")
    fills = page_fills(page.pdf(format="A4"))
    context.close()
    assert 0 < len(fills) <= 40, f"{len(fills)} pages"
    blank = [(i + 1, round(f, 2)) for i, f in enumerate(fills[:-1]) if f < 0.5]
    assert not blank, f"pages more than half blank (page, fill): {blank}"
    assert not t.errors, t.errors


def in_view(page, locator, what: str) -> None:
    """Wait for the element to come into the viewport: a loaded machine scrolls late, and a wrong scroll stays wrong,
    so waiting hides no bug (a hang fails naming ``what``)."""
    check = "e => { const r = e.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight }"
    until(page, check, arg=locator.element_handle(), what=f"{what} to come into view")


def in_its_box(locator, what: str) -> None:
    """Wait for the line to come into view inside its code box, as ``in_view`` waits."""
    check = """e => { const b = e.closest('code').getBoundingClientRect(), r = e.getBoundingClientRect();
                      return r.top >= b.top - 1 && r.bottom <= b.bottom + 1 }"""
    until(locator.page, check, arg=locator.element_handle(), what=f"{what} to come into view in its code box")


def test_the_card_links_to_its_row_and_printout_line(tab, base):
    page = tab.open(family_url(base, "?block=3"))
    part(page, "layers[i].mlp.router").click()
    c = card(page)
    row_link = c.locator("a.nc-card-row-link")
    href = row_link.get_attribute("href")
    row = page.locator(f"tr{href}")
    assert href.startswith("#v-") and row.count() == 1
    assert row.get_attribute("data-path") == "model.layers[i].mlp.router_logits"
    row_link.click()
    until(page, "h => location.hash === h", arg=href, what=f"the URL's hash to become {href}")
    in_view(page, row, "the card's row")
    # back to the diagram, once the page has stopped keeping the row in view (it does for a moment, so a fold
    # laid out late still shows it; a busy machine's late frame would undo a scroll made before that ends)
    until(page, "h => document.documentElement.getAttribute('data-nc-hash') === h "
                "&& !document.querySelector('[data-nc-keeping]')", arg=href,
          what="the page to handle the new hash and stop keeping the row in view")
    page.evaluate("window.scrollTo(0, 0)")
    # the pinned card's printout link shows the part's line, in its box too
    c.locator("a.nc-card-line-link").click()
    line = page.locator("pre.nc-printout .line.nc-lit").first
    assert line.get_attribute("data-path") == "model.layers[i].mlp.router"
    in_view(page, line, "the part's printout line")
    in_its_box(line, "the part's printout line")


def test_a_url_state_scrolls_its_part_into_view_and_drops_a_part_the_block_lacks(tab, base, site_facts):
    page = tab.open(family_url(base, "?block=3&part=layers[i].mlp.router"))
    in_view(page, part(page, "layers[i].mlp.router"), "the URL's part")
    in_its_box(page.locator("pre.nc-printout .line.nc-lit").first, "the URL's part's printout line")
    # a part drawn on one block kind only, asked for on a block of another kind: dropped from the URL
    kinds = site_facts["stack"]["block_kinds"]
    paths = [{p["id"] for p in k["parts"]} for k in kinds]
    only = sorted(paths[1] - paths[0])[0]
    block = site_facts["stack"]["blocks"].index(kinds[0]["kind"])
    page = tab.open(family_url(base, f"?block={block}&part={only}"))
    until(page, "() => !location.search.includes('part=')", what="the part the block lacks to leave the URL")
    assert f"block={block}" in page.evaluate("location.search") or block == 0


def test_404_finds_its_assets_under_a_sub_path(browser, tmp_path, site_facts):
    """Built without site_url (as `python -m generator build` does) and copied under /docs/ of a
    server that answers a missing URL with 404.html (as static hosts do): the page is styled, its
    links lead into /docs/, and Material's search worker loads from there."""
    from generator.site.mkdocs_run import mkdocs_build
    from generator.site.render import render_site

    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "qwen3_5_moe_text.json").write_text(json.dumps(site_facts), encoding="utf-8")
    render_site(tmp_path / "facts", tmp_path / "docs_src")
    mkdocs_build(tmp_path / "docs_src", tmp_path / "www" / "docs")
    not_found = (tmp_path / "www" / "docs" / "404.html").read_bytes()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_error(self, code, message=None, explain=None):
            if code != 404:
                return super().send_error(code, message, explain)
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(not_found)))
            self.end_headers()
            self.wfile.write(not_found)

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(tmp_path / "www"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{server.server_port}/docs/families/no/such/page")
        root = f"http://127.0.0.1:{server.server_port}/docs/"
        sheets = page.evaluate("[...document.styleSheets].map(s => s.href).filter(Boolean)")
        assert sheets and all(s.startswith(root) for s in sheets), sheets
        assert page.evaluate("getComputedStyle(document.querySelector('.md-header')).position") == "sticky"
        home = page.locator(".md-header__button.md-logo").get_attribute("href")
        assert page.evaluate("h => new URL(h, document.baseURI).href", home) == root
        config = page.evaluate("JSON.parse(document.getElementById('__config').textContent)")
        assert config["base"] == root and config["search"].startswith(root + "assets/")
        context.close()
    finally:
        server.shutdown()
        server.server_close()
