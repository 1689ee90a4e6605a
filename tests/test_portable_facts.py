"""The site is a function of the facts, and the facts are the same on every CPU: every fact a kernel computes,
collected under this machine's own kernels (the site's, ``native_facts``), ``ATEN_CPU_CAPABILITY=default`` (with
MKL's and oneDNN's generic branches) and ``avx2`` (``kernel_facts`` in tests/conftest.py, in shards of families:
tests/kernel_shards.py), is byte-identical. Under the other capabilities the families of the kernel cover are
collected: the fewest whose native collections together ran every kernel (ATen operator and dtypes) any family's
ran (generator/kernel_log.py), so every kernel any page's facts came from runs under every capability. The
other kernels' collections leave out the facts no kernel can change (``KERNEL_FREE``: the config tables, read off
meta-device models, and the edits, whose checks compare two forwards under the same kernels). The checkpoints' side
of the same promise, for every family, is tests/test_portable_pins.py."""

from __future__ import annotations

import json

import pytest
from kernel_shards import SHARDS, compared, families_of

from generator.facts.collect import KERNEL_FREE


def _kernels_part(text: str) -> str:
    facts = json.loads(text)
    facts = {key: value for key, value in facts.items() if key not in KERNEL_FREE}
    for variant in facts.get("variants") or []:
        variant.pop("edits", None)
    return json.dumps(facts, sort_keys=True, indent=1)


def test_the_shards_cover_every_family_once_per_capability():
    from kernel_shards import _names

    for capability in {shard.rsplit("-", 1)[0] for shard in SHARDS}:
        shares = [families_of(shard) for shard in SHARDS if shard.rsplit("-", 1)[0] == capability]
        assert sorted(name for share in shares for name in share) == _names(), capability


def test_the_compared_families_run_every_kernel_any_family_ran(native_facts):
    """The cover is the comparison's whole claim: read from the recorded kernels themselves, every kernel some
    family's native collection ran is run by a family the shards compare, under each capability."""
    from kernel_shards import _names

    recorded = {name: (native_facts / f"{name}.kernels").read_text().split() for name in _names()}
    assert all(recorded.values()), [name for name, ran in recorded.items() if not ran]
    for capability in {shard.rsplit("-", 1)[0] for shard in SHARDS}:
        chosen = [name for shard in SHARDS if shard.startswith(f"{capability}-") for name in compared(shard, native_facts)]
        ran = {kernel for name in chosen for kernel in recorded[name]}
        missing = {kernel for kernels in recorded.values() for kernel in kernels} - ran
        assert not missing, (capability, sorted(missing)[:10])
        assert len(chosen) < len(recorded), "the cover chose every family: the recording names no kernel"


@pytest.mark.slow
@pytest.mark.parametrize("shard", SHARDS)
def test_every_fact_is_the_same_under_every_capability(native_facts, kernel_facts, shard):
    """The pages are rendered from facts alone, so equal facts mean an equal site on every CPU."""
    other = kernel_facts(shard)
    names = sorted(f"{name}.json" for name in compared(shard, native_facts))
    assert names == sorted(p.name for p in other.glob("*.json")), shard
    for name in names:
        mine = (other / name).read_text(encoding="utf-8")
        # a kernels-only collection: none of the kernel-free facts, all the rest
        assert not set(json.loads(mine)) & set(KERNEL_FREE), (shard, name)
        assert _kernels_part(mine) == _kernels_part((native_facts / name).read_text(encoding="utf-8")), (shard, name)


@pytest.mark.parametrize("shard", SHARDS[:1])
def test_a_kernels_only_collection_leaves_out_only_the_kernel_free_facts(native_facts, kernel_facts, shard):
    """What the comparison above leaves out is exactly KERNEL_FREE: every other key of the native facts is there."""
    other = kernel_facts(shard)
    for name in compared(shard, native_facts):
        full = json.loads((native_facts / f"{name}.json").read_text())
        kernels = json.loads((other / f"{name}.json").read_text())
        assert set(full) - set(kernels) <= set(KERNEL_FREE) and set(kernels) <= set(full), name
