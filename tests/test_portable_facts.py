"""The site is a function of the facts, and the facts are the same on every CPU: every family's facts,
collected under this machine's own kernels, ``ATEN_CPU_CAPABILITY=default`` (with MKL's generic branch) and ``avx2``
(``facts_by_capability`` in tests/conftest.py), are byte-identical. The checkpoints' side of the same
promise is tests/test_portable_pins.py (kept apart so it runs while the facts are collected)."""

from __future__ import annotations

import pytest

from generator.recipe.family import all_families


@pytest.mark.slow
def test_every_fact_is_the_same_under_every_capability(facts_by_capability):
    """The pages are rendered from facts alone, so equal facts mean an equal site on every CPU."""
    native = facts_by_capability["native"]
    names = sorted(p.name for p in native.glob("*.json"))
    assert len(names) == len(all_families())
    for capability, other in facts_by_capability.items():
        assert names == sorted(p.name for p in other.glob("*.json")), capability
        for name in names:
            assert (native / name).read_bytes() == (other / name).read_bytes(), (capability, name)
