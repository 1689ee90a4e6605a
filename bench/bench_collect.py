"""What a family costs the build and the suite: CPU-seconds to collect each family's facts, measured one
after another in one process, and the projection for 60 and 150 families.

Run: python bench/bench_collect.py [--families a,b] [--keep DIR]. Collects into a temporary build directory
(``--keep DIR``: into DIR, kept, to diff two runs' facts); the checkpoint cache is the usual one, so a first run
also builds the checkpoints, outside the measurement.

What a family costs is its own work: the imports every family shares (torch, transformers, nnsight, and the
modeling module of each family, whose first import pulls in most of transformers) are paid once per process,
before the first measurement, and reported apart; each family's checkpoint is built or found beforehand.

The suite collects every family's facts once per CPU capability it checks (tests/capabilities.py), in
parallel processes on the 2 cores, so the projection for the suite's facts is families x mean x capabilities
/ 2 cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable


def cpu() -> float:
    """This process's CPU seconds, every thread's (torch's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def prepare(names: list[str] | None) -> tuple[list[str], float]:
    """The family names and the CPU-seconds of the shared imports (and checkpoints), paid before measuring."""
    start = cpu()
    import nnsight  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import nncanon  # noqa: F401
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.identity import import_module
    from generator.recipe.family import all_families, get_family

    names = names or [family.family for family in all_families()]
    for name in names:
        import_module(get_family(name))  # the family module and the transformers modeling module it imports
        checkpoint_dir(get_family(name))
    return names, cpu() - start


def measure(names: list[str], progress: Callable[[str], None] = lambda line: None) -> list[tuple[str, float, float]]:
    """(family, CPU-s, wall s) of a forced collect of each family's facts into $NNCANON_BUILD."""
    from generator.facts.collect import cached_facts
    from generator.recipe.family import get_family

    rows = []
    for name in names:
        before, wall = cpu(), time.perf_counter()
        cached_facts(get_family(name), progress=progress, force=True)
        rows.append((name, cpu() - before, time.perf_counter() - wall))
    return rows


def report(rows: list[tuple[str, float, float]], imports: float) -> None:
    print(f"imports (and checkpoints), once per process: {imports:.1f} CPU-s")
    print(f"{'family':<22}{'CPU-s':>8}{'wall s':>8}")
    for name, spent, wall in sorted(rows, key=lambda row: row[1]):
        print(f"{name:<22}{spent:8.1f}{wall:8.1f}")
    total = sum(spent for _, spent, _ in rows)
    mean, median = total / len(rows), statistics.median(spent for _, spent, _ in rows)
    print(f"{len(rows)} families: {total:.0f} CPU-s, mean {mean:.1f}, median {median:.1f}")
    for count in (60, 150):
        # the suite: every family under each capability (native, default; avx2 too on an AVX-512 machine)
        for capabilities in (2, 3):
            print(f"  {count} families x {capabilities} capabilities at this mean: "
                  f"{count * mean * capabilities / 60:.1f} CPU-min, {count * mean * capabilities / 2 / 60:.1f} min "
                  f"on 2 cores")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--families", help="comma-separated family names (default: every families/*.yaml)")
    parser.add_argument("--keep", metavar="DIR", help="collect into DIR and keep the facts (to diff two runs' facts)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NNCANON_BUILD"] = args.keep or tmp
        names, imports = prepare(args.families.split(",") if args.families else None)
        rows = measure(names)
    report(rows, imports)


if __name__ == "__main__":
    main()
