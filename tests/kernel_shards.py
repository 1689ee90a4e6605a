"""The capability comparison's shards: each non-native capability's kernels-only collection is cut into shares
of at most ``PER_SHARD`` families, each share a work unit of its own (tests/conftest.py), so the collections
spread over both workers and no unit runs for minutes as families are added. Every family is in exactly one
share of every capability: the comparison still covers them all."""

from __future__ import annotations

import math

from capabilities import capabilities

from generator.recipe.family import all_families

#: families per shard: a kernels-only collection takes ~1 CPU-second per family (bench/bench_suite.py), so a
#: shard is well under a minute on an idle core
PER_SHARD = 30


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
