"""The tiny checkpoints are a pure function of their recipes: every family's checkpoint (and every variant's),
built anew under the generic CPU kernels (``ATEN_CPU_CAPABILITY=default`` with MKL's and oneDNN's generic
branches) and AVX2's, gives byte for byte the files this machine's own kernels built, and those are the pin. A pin
that only reproduces on the machine that made it would break ``make site`` on the next one.

The checkpoints are the ones the facts' collections built (``facts_by_capability`` in tests/conftest.py: each
non-native collection has a cache of its own, where ``checkpoint_dir`` refuses a build whose digest is not the
pin), so this module builds nothing itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.checkpoint.checkpoints import MANIFEST_FILE, cache_root, cached_dir
from generator.recipe.family import all_families, get_family


def _families():
    out = []
    for family in all_families():
        out.append(family)
        out += [family.variant(spec["name"]) for spec in family.variants]
    return out


def _files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != MANIFEST_FILE}


@pytest.fixture(scope="module")
def caches(facts_by_capability) -> dict[str, Path]:
    """capability -> the checkpoint cache its collection read: this run's own natively, else a fresh one."""
    return {capability: cache_root() if capability == "native" else facts.parent / "checkpoints"
            for capability, facts in facts_by_capability.items()}


def test_each_cache_was_built_under_its_own_kernels(caches):
    # otherwise the comparison below proves nothing on this machine
    import torch

    assert torch.backends.cpu.get_cpu_capability() != "DEFAULT", "this CPU runs only the generic kernels"
    for capability, cache in caches.items():
        if capability == "native":
            continue
        built = {json.loads((d / MANIFEST_FILE).read_text())["cpu_capability"] for d in cache.iterdir()
                 if (d / MANIFEST_FILE).is_file()}
        assert built == {capability.upper()}, (capability, built)


@pytest.mark.parametrize("family", _families(), ids=lambda f: f.family)
def test_every_capability_builds_the_pinned_files(caches, family):
    name = cached_dir(get_family(family)).name  # the recipe's key: the same under every capability
    native = cache_root() / name
    manifest = json.loads((native / MANIFEST_FILE).read_text())
    assert manifest["sha256"] == family.tiny["sha256"]
    files = _files(native)
    assert files, native
    for capability, cache in caches.items():
        assert _files(cache / name) == files, f"the same recipe gave other files under {capability}"
