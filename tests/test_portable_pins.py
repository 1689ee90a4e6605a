"""The tiny checkpoints are a pure function of their recipes: a family's checkpoint (and every variant's), built
anew under the generic CPU kernels (``ATEN_CPU_CAPABILITY=default`` with MKL's and oneDNN's generic branches) and
AVX2's, gives byte for byte the files this machine's own kernels built, and those are the pin. A pin that only
reproduces on the machine that made it would break ``make site`` on the next one.

Under the other kernels the families of the checkpoint builds' kernel cover are built (tests/kernel_shards.py
``built``): the fewest whose native builds together ran every kernel (ATen operator and dtypes) any family's build
ran, so every kernel any pin came from runs under every capability. They are the ones the facts' collections built
(``kernel_facts`` in tests/conftest.py, one shard of families at a time, each with a cache of its own, where
``checkpoint_dir`` refuses a build whose digest is not the pin), so this module builds nothing itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernel_shards import SHARDS, built, checkpoint_kernels

from generator.checkpoint.checkpoints import MANIFEST_FILE, cache_root, cached_dir
from generator.recipe.family import get_family


def _families(shard: str, facts_dir: Path):
    out = []
    for name in built(shard, facts_dir):
        family = get_family(name)
        out.append(family)
        out += [family.variant(spec["name"]) for spec in family.variants]
    return out


def _files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*"))
            if p.is_file() and p.name != MANIFEST_FILE}


@pytest.mark.parametrize("shard", SHARDS)
def test_every_capability_builds_the_pinned_files(native_facts, kernel_facts, shard):
    """Each shard's built families (and their variants), built under the shard's kernels, give the native files."""
    import torch

    # otherwise the comparison proves nothing on this machine
    assert torch.backends.cpu.get_cpu_capability() != "DEFAULT", "this CPU runs only the generic kernels"
    capability = shard.rsplit("-", 1)[0]
    cache = kernel_facts(shard).parent / "checkpoints"
    built = {json.loads((d / MANIFEST_FILE).read_text())["cpu_capability"] for d in cache.iterdir()
             if (d / MANIFEST_FILE).is_file()}
    assert built == {capability.upper()}, (shard, built)  # each was built under the shard's own kernels
    for family in _families(shard, native_facts):
        name = cached_dir(get_family(family)).name  # the recipe's key: the same under every capability
        native = cache_root() / name
        manifest = json.loads((native / MANIFEST_FILE).read_text())
        assert manifest["sha256"] == family.tiny["sha256"], family.family
        files = _files(native)
        assert files, native
        assert _files(cache / name) == files, f"{family.family}: the same recipe gave other files under {capability}"


def test_the_built_checkpoints_run_every_kernel_any_build_ran(native_facts):
    """The cover is the comparison's whole claim: read from the manifests themselves, every kernel some family's
    native checkpoint build ran is run by a family the shards build, under each capability."""
    from kernel_shards import _names

    recorded = checkpoint_kernels(_names())
    for capability in {shard.rsplit("-", 1)[0] for shard in SHARDS}:
        chosen = [name for shard in SHARDS if shard.startswith(f"{capability}-") for name in built(shard, native_facts)]
        ran = {kernel for name in chosen for kernel in recorded[name]}
        missing = {kernel for kernels in recorded.values() for kernel in kernels} - ran
        assert not missing, (capability, sorted(missing)[:10])
        # a family whose manifest records no kernels (a cache built before the recording) is always built
        assert {name for name, ran in recorded.items() if not ran} <= set(chosen), capability
