"""Build times, measured side by side in one run: a cold build (no cached checkpoints or facts), with the
CPU-seconds each family's facts cost and the projection for 60 and 150 families; a warm rebuild (everything
cached); and `mkdocs build` of the same pages alone.

Run: python bench/bench_build.py [--families a,b]. Builds into a temporary directory, so the repository's
build/ and site/ are left alone. The cold build is: checkpoints and shared imports (reported apart), every
family's facts collected one after another (bench_collect.measure: CPU-s per family), then the rest of the
build (notes pages, survey, render, mkdocs) on those facts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_collect import measure, prepare, report  # noqa: E402


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--families", help="comma-separated family names (default: every families/*.yaml)")
    names = parser.parse_args().families
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["NNCANON_BUILD"] = str(root / "build")
        os.environ["NNCANON_CACHE"] = str(root / "checkpoints")
        from generator import build as B
        from generator.site.render import mkdocs_build

        quiet = lambda line: None  # noqa: E731
        start = time.perf_counter()
        families, imports = prepare(names.split(",") if names else None)
        rows = measure(families)
        if names:
            B.collect_all(families, progress=quiet)  # cached: the timings above
            cold = None
        else:
            B.build(site=root / "site", progress=quiet)  # the facts are cached: the rest of the build
            cold = time.perf_counter() - start
        warm = timed(lambda: B.build(site=root / "site-warm", progress=quiet))
        mkdocs_only = timed(lambda: mkdocs_build(root / "build" / "docs", root / "site-mkdocs"))
        pages = len(list((root / "build" / "docs").rglob("*.md")))
    count = len(list((Path(__file__).resolve().parent.parent / "families").glob("*.yaml")))
    report(rows, imports)
    print(f"site build, {count} families, {pages} pages")
    if cold is not None:
        print(f"  cold build (checkpoints + facts + render + mkdocs) {cold:8.1f} s   (target < 600 s)")
    print(f"  warm rebuild (facts cached)                        {warm:8.1f} s   (target < 10 s)")
    print(f"  mkdocs build of the same pages alone               {mkdocs_only:8.1f} s")
    print(f"  warm / mkdocs alone                                {warm / mkdocs_only:8.2f}x")


if __name__ == "__main__":
    main()
