"""The built site and the browser the browser tests share (tests/test_browser*.py).

The site is built once per session from tests/fixtures/facts (plus one condition on a diagram part's
value, whose text tries to inject HTML, so the card's ⚠︎ line and its escaping are exercised) and
served by a threaded http.server on 127.0.0.1. It is built with ``site_url`` set to that server
(mkdocs.yml sets none): Material's instant navigation only follows the links its sitemap.xml lists,
and without site_url that sitemap is empty, so every link would be a full page load. The session
fixtures (``site_facts``, ``base``, ``browser``, ``crawl``) are in tests/conftest.py.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin

from limits import HANG, WAIT

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "facts"
#: the Coverage page's rows: four model types of a survey run (tests/test_survey_page.py)
SURVEY = ROOT / "tests" / "fixtures" / "survey"
FAMILY = "qwen3_5_moe_text"
CHROMIUM = Path(os.environ.get("NNCANON_CHROMIUM") or "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
EVIL = '<img src=x onerror="window.__pwned=1"> & </div>'


def site_facts() -> dict:
    facts = json.loads((FIXTURES / f"{FAMILY}.json").read_text(encoding="utf-8"))
    facts = copy.deepcopy(facts)
    for host in facts["hosts"]:
        if host["path"] == "model.layers[i].mlp":
            for v in host["values"]:
                if v["name"] == "router_logits":
                    v["conditions"] = [{"needs": 'route_kernels(family, "torch")', "why": EVIL}]
                    v["availability"] = {"sdpa": False, 'route_kernels "torch"': True}
    return facts



def build_site(tmp: Path, facts: dict):
    """Render and build the site of these facts under tmp; its server, not yet serving."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from generator.site.render import MKDOCS_YML, render_site
    from generator.site.serve import site_server

    (tmp / "facts").mkdir()
    (tmp / "facts" / f"{FAMILY}.json").write_text(json.dumps(facts), encoding="utf-8")
    site = tmp / "site"
    site.mkdir()
    server = site_server(site)
    url = server.url
    render_site(tmp / "facts", tmp / "docs", survey=SURVEY)
    level = logging.getLogger("mkdocs").level
    logging.getLogger("mkdocs").setLevel(logging.ERROR)
    try:
        build(
            load_config(
                str(MKDOCS_YML),
                docs_dir=str(tmp / "docs"),
                site_dir=str(site),
                site_url=url + "/",
                strict=True,
            )
        )
    finally:
        logging.getLogger("mkdocs").setLevel(level)
    return server


class Tab:
    """A page plus every console error and uncaught exception it had."""

    def __init__(self, page):
        self.page = page
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def open(self, url: str):
        self.page.goto(url)
        until(self.page, "window.__nncanonReady !== undefined", what=f"the page's scripts to start on {url}")
        return self.page


def until(page, expression: str, arg=None, what: str | None = None) -> None:
    """Wait for ``expression`` to hold in the page: the state a test checks, never a fixed pause. Only a hang
    runs past tests/limits.py's WAIT, and then the test fails naming what it waited for."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(expression, arg=arg, timeout=WAIT * 1000)
    except PlaywrightTimeout:
        raise AssertionError(f"waited {WAIT} s for {what or expression}") from None


#: Material fetches sitemap.xml once per full load and follows a link instantly only once it has parsed it
#: (a click before then is a full load: its click stream is combined with the sitemap's). Set before a load
#: with ``page.add_init_script``; it marks the page once the parsed sitemap has reached Material's streams
#: (the microtask after the parse, so the synchronous chain that stores it has run).
SITEMAP_WATCH = """
(() => {
  const parse = DOMParser.prototype.parseFromString;
  DOMParser.prototype.parseFromString = function (text, type) {
    const doc = parse.call(this, text, type);
    if (type === "text/xml" && doc.querySelector("urlset")) queueMicrotask(() => { window.__ncSitemap = true; });
    return doc;
  };
})();
"""


def open_instant(tab, url: str):
    """Open ``url`` and wait until Material's instant navigation follows its links (its sitemap is in)."""
    tab.page.add_init_script(SITEMAP_WATCH)
    page = tab.open(url)
    until(page, "window.__ncSitemap === true", what="Material to load the sitemap its instant navigation needs")
    return page


def settled(page) -> None:
    """Two animation frames: what the page's scripts queued for the next frame (a re-placed card, a reached
    scroll box) has run."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")



def serious_axe_violations(axe, page) -> list[str]:
    """axe-core's serious and critical violations on the page as it stands: "impact rule (help): targets".

    ``resultTypes``: every rule still checks every node, and a violation lists all its nodes; passes and
    incomplete results come back with one node each instead of every one (12,000 on the family page, whose
    serialization was half of axe's time there)."""
    out = []
    for v in axe.run(page, options={"resultTypes": ["violations"]}).response["violations"]:
        if v["impact"] in ("serious", "critical"):
            targets = ", ".join(" ".join(map(str, n["target"])) for n in v["nodes"][:5])
            out.append(f"{v['impact']} {v['id']} ({v['help']}): {targets}")
    return out


def family_url(base: str, query: str = "") -> str:
    return f"{base}/families/{FAMILY}/{query}"


def part(page, path: str):
    """The drawn (visible) part with this standard path."""
    return page.locator(f'.nc-part[data-path="{path}"]:visible')



def card(page, section: str = "text"):
    return page.locator(f"#nc-card-{section}")



class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) and tag in ("a", "link", "script", "img", "source"):
                self.links.append(a[key])



def fetch(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=HANG) as r:
            kind = r.headers.get_content_type()
            body = r.read().decode("utf-8", "replace") if kind == "text/html" else ""
            return r.status, kind, body
    except urllib.error.HTTPError as e:
        return e.code, "", ""



def crawl_site(base: str) -> dict:
    """Every internal URL reachable from the home page (and 404.html): {url: (status, ids, links)}."""
    seen: dict[str, tuple[int, set[str], list[str]]] = {}
    todo = [f"{base}/", f"{base}/404.html"]
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        status, kind, body = fetch(url)
        parser = _Links()
        if kind == "text/html":
            parser.feed(body)
        links = [
            urljoin(url, h) for h in parser.links if not h.startswith(("mailto:", "javascript:", "data:"))
        ]
        seen[url] = (status, parser.ids, links)
        for link in links:
            target = urldefrag(link)[0]
            if target.startswith(base) and target not in seen:
                todo.append(target)
    return seen



def html_pages(crawl, base) -> list[str]:
    return sorted(
        u
        for u, (status, ids, _) in crawl.items()
        if status == 200 and ids and (u.endswith("/") or u.endswith(".html"))
    )

