"""The family page in Chromium: the bytes it transfers, and the time from navigation start to interactive,
with each block's inside (generator/site/interiors.py) and without it, side by side in one run.

Run: python bench/bench_page.py [--family NAME] [--repeats N]

Renders and builds the site twice from build/facts (else tests/fixtures/facts) into a temporary
directory: as published, and with the interiors left out (``render_site(..., interiors=False)``, an
option only this bench uses). Serves both with a threaded http.server on 127.0.0.1 (no compression,
like a plain static host), opens the family page of each in turn in Debian's chromium through
playwright, each time in a fresh context (a cold cache), and prints, for the published page:

- transferred: every response of the page load from the network log (the HTML and every asset it
  loads: styles, scripts, the search worker, images), headers + body bytes, by type, with what gzip
  would make of the bodies (what a compressing static host would send); then what opening search
  adds (the search index, which a page view does not load);
- timings, ms from navigation start (medians over the repeats): the HTML received, DOMContentLoaded,
  load, and interactive: the diagrams' init done (``window.__nncanonReady``, set by
  site_templates/assets/nncanon.js), and how long that init itself took;

then both pages side by side: bytes and medians, and their ratio (with / without the interiors).
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from generator.site.serve import site_server

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def build_site(out: Path, interiors: bool = True) -> Path:
    sys.path.insert(0, str(ROOT))
    from generator.site.render import mkdocs_build, render_site

    facts = ROOT / "build" / "facts"
    if not any(p for p in facts.glob("*.json") if p.name != "index.json"):
        facts = ROOT / "tests" / "fixtures" / "facts"
    print(f"site {'with' if interiors else 'without'} the interiors: built from {facts.relative_to(ROOT)}")
    render_site(facts, out / "docs", interiors=interiors)
    mkdocs_build(out / "docs", out / "site")
    return out / "site"


def kind_of(url: str, resource_type: str) -> str:
    path = url.split("?")[0]
    if resource_type == "document":
        return "html"
    for ext, name in (
        (".css", "css"),
        (".js", "js"),
        (".json", "json"),
        (".png", "image"),
        (".svg", "image"),
    ):
        if path.endswith(ext):
            return name
    return resource_type


def load_once(browser, url: str) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    done = []
    page.on("requestfinished", lambda r: done.append(r))
    page.goto(url)
    page.wait_for_function("window.__nncanonReady !== undefined")
    page.wait_for_load_state("networkidle")
    t = page.evaluate(
        """() => {
          const n = performance.getEntriesByType('navigation')[0];
          return {html: n.responseEnd, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd,
                  ready: window.__nncanonReady, init: window.__nncanonInitMs};
        }"""
    )
    viewed = list(done)
    # the search index is held back until search is opened (site_templates/overrides/main.html): measure it
    with page.expect_request_finished(lambda r: "search_index.json" in r.url):
        page.focus("input.md-search__input")
    resources, searched = [], []
    for r in done:
        if r not in viewed:
            body = r.response().body()
            searched.append({"url": r.url, "body": r.sizes()["responseBodySize"], "gzip": len(gzip.compress(body, 6))})
            continue
        sizes = r.sizes()
        response = r.response()
        body = response.body() if response else b""
        resources.append(
            {
                "url": r.url,
                "kind": kind_of(r.url, r.resource_type),
                "headers": sizes["responseHeadersSize"],
                "body": sizes["responseBodySize"],
                "gzip": len(gzip.compress(body, 6)) if body else 0,
            }
        )
    context.close()
    return {"timings": t, "resources": resources, "searched": searched}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", default="qwen3_5_moe_text")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        sites = {k: build_site(Path(tmp) / k, interiors=k == "with") for k in ("with", "without")}
        servers = {k: site_server(site).start() for k, site in sites.items()}
        urls = {k: f"{server.url}/families/{args.family}/" for k, server in servers.items()}
        both: dict[str, list] = {"with": [], "without": []}
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for n in range(args.repeats + 1):  # the first of each warms up; the two pages alternate
                    for k in (("with", "without") if n % 2 else ("without", "with")):
                        run = load_once(browser, urls[k])
                        if n:
                            both[k].append(run)
                browser.close()
        finally:
            for server in servers.values():
                server.shutdown()
    runs, url = both["with"], urls["with"]
    res = runs[-1]["resources"]
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in res:
        k = by_kind[r["kind"]]
        k[0] += 1
        k[1] += r["body"]
        k[2] += r["headers"]
        k[3] += r["gzip"]
    total = [sum(k[i] for k in by_kind.values()) for i in range(4)]
    print(f"\nfamily page {url.split('/', 3)[3]}: {total[0]} responses from the network log")
    print(f"  {'type':<7}{'files':>6}{'body':>12}{'headers':>10}{'gzipped body':>14}")
    for kind, (n, body, headers, gz) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:<7}{n:>6}{body:>12,}{headers:>10,}{gz:>14,}")
    print(f"  {'total':<7}{total[0]:>6}{total[1]:>12,}{total[2]:>10,}{total[3]:>14,}")
    print(f"  transferred: {total[1] + total[2]:,} bytes uncompressed, ~{total[3] + total[2]:,} gzipped")
    print(f"  a page view: ~{(total[3] + total[2]) / 1024:.0f} KiB gzipped (the issue's budget: 150 KB)")
    for r in runs[-1]["searched"]:
        print(f"  opening search then fetches {r['url'].split('/', 3)[3]}: {r['body']:,} bytes (~{r['gzip']:,} gzipped)")
    html = next(r for r in res if r["kind"] == "html")
    print(f"  of which the HTML: {html['body']:,} bytes (~{html['gzip']:,} gzipped)")
    for r in sorted(res, key=lambda r: -r["body"])[:6]:
        print(f"    {r['body']:>10,}  {r['url'].split('/', 3)[3]}")

    print(f"\ntimings, ms from navigation start (median of {len(runs)} cold loads; min–max):")
    for key, label in (
        ("html", "HTML received"),
        ("dcl", "DOMContentLoaded"),
        ("load", "load"),
        ("ready", "interactive (diagrams ready)"),
        ("init", "  of which the diagrams' init"),
    ):
        xs = [r["timings"][key] for r in runs]
        print(f"  {label:<30}{statistics.median(xs):>8.1f}   ({min(xs):.1f}–{max(xs):.1f})")
    compare(both)
    return 0


def compare(both: dict[str, list]) -> None:
    """The page with its interiors against the page without them, measured in the same run."""
    def weight(runs: list, field: str, kind: str | None = None) -> int:
        res = runs[-1]["resources"]
        return sum(r[field] + (r["headers"] if field == "body" else 0) for r in res if kind in (None, r["kind"]))

    def median(runs: list, key: str) -> float:
        return statistics.median(r["timings"][key] for r in runs)

    rows = [("HTML, bytes", lambda rs: weight(rs, "body", "html")),
            ("HTML, gzipped", lambda rs: weight(rs, "gzip", "html")),
            ("page transferred, bytes", lambda rs: weight(rs, "body")),
            ("page transferred, gzipped", lambda rs: weight(rs, "gzip") + weight(rs, "headers")),
            ("DOMContentLoaded, ms", lambda rs: median(rs, "dcl")),
            ("load, ms", lambda rs: median(rs, "load")),
            ("interactive, ms", lambda rs: median(rs, "ready")),
            ("  the diagrams' init, ms", lambda rs: median(rs, "init"))]
    n = len(both["with"])
    print(f"\nwith the interiors vs without (same run, {n} alternating cold loads each; times are medians):")
    print(f"  {'':<28}{'with':>12}{'without':>12}{'ratio':>8}")
    for label, f in rows:
        a, b = f(both["with"]), f(both["without"])
        digits = 1 if label.endswith("ms") else 0
        print(f"  {label:<28}{a:>12,.{digits}f}{b:>12,.{digits}f}{(a / b if b else float('nan')):>8.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
