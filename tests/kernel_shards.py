"""The capability comparison's shards: each non-native capability's work is cut into shares of at most
``PER_SHARD`` families, each share a work unit of its own (tests/conftest.py), so the work spreads over both
workers and no unit runs for minutes as families are added.

Every family is in exactly one share of every capability. A shard builds the tiny checkpoints of the families
of its share that :func:`built` names (tests/test_portable_pins.py compares them): those of the cover of the
checkpoint builds' kernels (generator/kernel_log.py), the fewest families whose builds together ran every kernel
any family's build ran; and it collects kernels-only facts for those :func:`compared` names: those of the cover of
the native collections' kernels. A family outside a cover runs no kernel the cover does not run under the other
capabilities too, so building or collecting it again would run no new code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from capabilities import capabilities

from generator.kernel_log import cover, read_kernels
from generator.recipe.family import all_families

#: families per shard: a shard builds the checkpoints of about one family in five (16 of 129 cover the builds'
#: kernels; ~0.15 CPU-second each) and collects about one in three (40 of 129 cover the collections'; ~1.3 each,
#: bench/bench_suite.py), so a share of 65 is 30-40 CPU-seconds (29 to 39 measured); beside Chromium's sweeps on a busy machine a
#: share of 130 ran for 122 s under ATEN_CPU_CAPABILITY=avx2, past the suite's 120 s bound on one test
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


def checkpoint_kernels(names: list[str]) -> dict[str, list[str]]:
    """Each family's kernels its tiny checkpoint's native build (and its variants') ran, from the build's manifest in
    the machine's cache; an empty list (which :func:`cover` always takes) where a manifest records none."""
    from generator.checkpoint.checkpoints import MANIFEST_FILE, cached_dir
    from generator.recipe.family import get_family

    out = {}
    for name in names:
        family = get_family(name)
        ran: set[str] = set()
        for built in [family, *(family.variant(spec["name"]) for spec in family.variants)]:
            manifest = cached_dir(built) / MANIFEST_FILE
            recorded = json.loads(manifest.read_text(encoding="utf-8")).get("kernels") if manifest.is_file() else None
            if not recorded:
                ran = set()
                break
            ran.update(recorded)
        out[name] = sorted(ran)
    return out


def built(shard: str, facts_dir: Path) -> list[str]:
    """The shard's families whose checkpoints (with their variants') it builds: those in the cover of every
    checkpoint build's kernels, and those whose facts it collects (a collection builds its checkpoint)."""
    chosen = set(cover(checkpoint_kernels(_names())))
    return sorted({name for name in families_of(shard) if name in chosen} | set(compared(shard, facts_dir)))


def compared(shard: str, facts_dir: Path) -> list[str]:
    """The shard's families whose facts the comparison collects: those in the cover of every family's kernels,
    as the native collection (``facts_dir``) recorded them."""
    chosen = set(cover(read_kernels(facts_dir, _names())))
    return [name for name in families_of(shard) if name in chosen]
