"""What a family costs the build and the suite: CPU-seconds to collect each family's facts, measured one
after another in one process (imports paid once, before the first), with the tiny checkpoints already built,
and the projection for 60 and 150 families.

Run: python bench/bench_collect.py [--families a,b]. Collects into a temporary build directory (the
checkpoint cache is the usual one, so a first run also builds the checkpoints, outside the measurement).

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


def cpu() -> float:
    """This process's CPU seconds, every thread's (torch's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--families", help="comma-separated family names (default: every families/*.yaml)")
    wanted = parser.parse_args().families
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NNCANON_BUILD"] = tmp
        start = cpu()
        import nnsight  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401

        import nncanon  # noqa: F401
        from generator.checkpoint.checkpoints import checkpoint_dir
        from generator.facts.collect import cached_facts
        from generator.recipe.family import all_families

        imports = cpu() - start
        names = wanted.split(",") if wanted else [family.family for family in all_families()]
        for name in names:
            checkpoint_dir(name)
        rows = []
        for name in names:
            before, wall = cpu(), time.perf_counter()
            cached_facts(name, progress=lambda line: None, force=True)
            rows.append((name, cpu() - before, time.perf_counter() - wall))
    print(f"imports, once per process: {imports:.1f} CPU-s")
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
                  f"{count * mean * capabilities / 2 / 60:.1f} min on 2 cores")


if __name__ == "__main__":
    main()
