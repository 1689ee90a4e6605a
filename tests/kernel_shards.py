"""The capability comparison's shards: each non-native capability's work is cut into shares of at most
``PER_SHARD`` families, each share a work unit of its own (tests/conftest.py), so the work spreads over both
workers and no unit runs for minutes as families are added.

A shard builds the tiny checkpoint of every family of its share (every family is in exactly one share of
every capability: tests/test_portable_pins.py compares them all), and collects kernels-only facts for the
families of its share that :func:`compared` names: those of the kernel cover (generator/facts/kernels.py), the
fewest families whose collections together ran every kernel any family's ran. A family outside the cover runs
no kernel the cover does not run under the other capabilities too, so comparing its facts would run no new code.
"""

from __future__ import annotations

import math
from pathlib import Path

from capabilities import capabilities

from generator.facts.kernels import cover, read_kernels
from generator.recipe.family import all_families

#: families per shard: building a tiny checkpoint takes ~0.35 CPU-second and a kernels-only collection ~1.3
#: (bench/bench_suite.py), and about one family in five is in the cover, so a shard is well under a minute
PER_SHARD = 65


def _names() -> list[str]:
    return sorted(family.family for family in all_families())


def count() -> int:
    return max(1, math.ceil(len(_names()) / PER_SHARD))


#: "<capability>-<k>" for every capability but this machine's own and every share k
SHARDS = [f"{capability}-{k}" for capability in capabilities() if capability != "native" for k in range(count())]


def families_of(shard: str) -> list[str]:
    """The families of one shard: every count()-th family by name, from the shard's index (the shares of one
    capability are disjoint and together every family)."""
    k = int(shard.rsplit("-", 1)[1])
    return _names()[k::count()]


def compared(shard: str, facts_dir: Path) -> list[str]:
    """The shard's families whose facts the comparison collects: those in the cover of every family's kernels,
    as the native collection (``facts_dir``) recorded them."""
    chosen = set(cover(read_kernels(facts_dir, _names())))
    return [name for name in families_of(shard) if name in chosen]
