"""The site is a function of the facts, and the facts are the same on every CPU: every family's facts,
collected under this machine's own kernels, ``ATEN_CPU_CAPABILITY=default`` (with MKL's and oneDNN's generic
branches) and ``avx2`` (``facts_by_capability`` in tests/conftest.py), are byte-identical in every fact a kernel
computes. The other kernels' collections leave out the facts no kernel can change (``KERNEL_FREE``: the config
tables, read off meta-device models, and the edits, whose checks compare two forwards under the same kernels). The
checkpoints' side of the same promise is tests/test_portable_pins.py."""

from __future__ import annotations

import json

import pytest

from generator.facts.collect import KERNEL_FREE
from generator.recipe.family import all_families


def _kernels_part(text: str) -> str:
    facts = json.loads(text)
    facts = {key: value for key, value in facts.items() if key not in KERNEL_FREE}
    for variant in facts.get("variants") or []:
        variant.pop("edits", None)
    return json.dumps(facts, sort_keys=True, indent=1)


@pytest.mark.slow
def test_every_fact_is_the_same_under_every_capability(facts_by_capability):
    """The pages are rendered from facts alone, so equal facts mean an equal site on every CPU."""
    native = facts_by_capability["native"]
    names = sorted(p.name for p in native.glob("*.json"))
    assert len(names) == len(all_families())
    for capability, other in facts_by_capability.items():
        assert names == sorted(p.name for p in other.glob("*.json")), capability
        for name in names:
            mine = (other / name).read_text(encoding="utf-8")
            if capability != "native":  # a kernels-only collection: none of the kernel-free facts, all the rest
                assert not set(json.loads(mine)) & set(KERNEL_FREE), (capability, name)
            assert _kernels_part(mine) == _kernels_part((native / name).read_text(encoding="utf-8")), (capability, name)


def test_a_kernels_only_collection_leaves_out_only_the_kernel_free_facts(facts_by_capability):
    """What the comparison above leaves out is exactly KERNEL_FREE: every other key of the native facts is there."""
    native, other = facts_by_capability["native"], facts_by_capability["default"]
    for path in sorted(native.glob("*.json")):
        full, kernels = json.loads(path.read_text()), json.loads((other / path.name).read_text())
        assert set(full) - set(kernels) <= set(KERNEL_FREE) and set(kernels) <= set(full), path.name
