"""Where `make test` spends its CPU: each test file run alone, in its own pytest process, one after another,
with the CPU-seconds it cost (its process and every child: the facts fixture's collects, the browser, the
TransformerLens subprocess), largest first, and what share of the whole each takes.

Run: python bench/bench_suite.py [tests/test_a.py ...] (default: every tests/test_*.py). Meant for an idle
machine: the whole suite, file by file, takes its CPU-seconds in wall time on one core. The sum is the suite's
CPU cost; `make test` (two workers, tests/conftest.py) can at best halve it in wall time. A file whose tests
share a session fixture with others (conftest.SHARED: the facts, the browser site) pays that fixture here alone,
so the files of one unit are run together, as one row.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def units(files: list[Path]) -> list[list[Path]]:
    """The files, those of one conftest.SHARED unit together (its session fixture computed once)."""
    from conftest import SHARED

    rows: dict[str, list[Path]] = {}
    for path in files:
        unit = next((name for name, members in SHARED.values() if path.name in members), str(path))
        rows.setdefault(unit, []).append(path)
    return list(rows.values())


def main() -> None:
    files = [Path(a) for a in sys.argv[1:]] or sorted((ROOT / "tests").glob("test_*.py"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows = []
    for unit in units(files):
        before, start = children_cpu(), time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", *map(str, unit)], cwd=ROOT,
                             env=env, capture_output=True, text=True)
        said = [line for line in run.stdout.splitlines() if " in " in line and ("passed" in line or "failed" in line
                                                                            or "error" in line)]
        last = said[-1].strip("= ") if said else f"exit {run.returncode}"
        rows.append((" ".join(p.name for p in unit), children_cpu() - before, time.perf_counter() - start, last))
    total = sum(cpu for _, cpu, _, _ in rows)
    print(f"{'test file(s)':<60}{'CPU-s':>8}{'wall s':>8}{'share':>7}  result")
    for name, cpu, wall, last in sorted(rows, key=lambda row: -row[1]):
        print(f"{name[:59]:<60}{cpu:8.1f}{wall:8.1f}{cpu / max(total, 1e-9):7.1%}  {last[:60]}")
    print(f"the suite: {total:.0f} CPU-s ({total / 60:.1f} CPU-min): at best {total / 2 / 60:.1f} min on 2 idle cores")


if __name__ == "__main__":
    main()
