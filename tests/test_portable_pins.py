"""The tiny checkpoints are a pure function of their recipes: every family's checkpoint, built in
a fresh cache under the generic CPU kernels (``ATEN_CPU_CAPABILITY=default``), AVX2's and this
machine's own, gives exactly the pinned files. A pin that only reproduces on the machine that
made it would break ``make site`` on the next one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from capabilities import capabilities, environment
from limits import HANG

from generator.recipe.family import all_families
from generator.recipe.fields import REPO_ROOT

BUILD_ALL = """
import json, sys
from generator.checkpoint import checkpoints as C
from generator.recipe.family import all_families
out = {}
for fam in all_families():
    tmp, digest, files = C._temp_build(fam)
    out[fam.family] = {"digest": digest, "files": files}
out["capability"] = C.cpu_capability()
json.dump(out, sys.stdout)
"""


def _build_everything(capability: str | None, cache) -> dict:
    env = environment(capability or "native", NNCANON_CACHE=str(cache))
    done = subprocess.run([sys.executable, "-c", BUILD_ALL], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    return {capability: _build_everything(None if capability == "native" else capability,
                                          tmp_path_factory.mktemp(capability))
            for capability in capabilities()}


def test_the_two_capabilities_differ(builds):
    # otherwise this test proves nothing on this machine
    assert builds["default"]["capability"] == "DEFAULT"
    assert builds["native"]["capability"] != "DEFAULT", "this CPU runs only the generic kernels"


@pytest.mark.parametrize("family", [f.family for f in all_families()])
def test_every_capability_builds_the_pinned_files(builds, family):
    pin = next(f for f in all_families() if f.family == family).tiny["sha256"]
    native = builds["native"][family]
    assert native["digest"] == pin
    for capability, built in builds.items():
        assert built[family]["files"] == native["files"], f"the same recipe gave other files under {capability}"
        assert built[family]["digest"] == pin, capability

