"""The kernels the portability tests ask for are the kernels that run: each capability's environment
(tests/capabilities.py) takes effect in a fresh process, in ATen's vector code, MKL's matmul and oneDNN's
convolution, and the generic one gives other bits than this machine's own on a matmul. Otherwise a
byte-identical result under every capability (tests/test_portable_facts.py, test_portable_pins.py,
test_survey.py) would prove nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from capabilities import capabilities, environment
from limits import HANG

# a matmul whose shape MKL reduces in another order on its generic branch than on this CPU's own (found by trying
# shapes: any of several does), and what each process reports of its kernels
PROBE = """
import hashlib, json, torch
torch.manual_seed(0)
a, b = torch.randn(7, 1000), torch.randn(1000, 9)
torch.nn.Conv1d(4, 4, 3, groups=4)(torch.randn(1, 4, 9))  # oneDNN's: it reports its ISA on a first primitive
print(json.dumps({"aten": torch.backends.cpu.get_cpu_capability(),
                  "bits": hashlib.sha256((a @ b).numpy().tobytes()).hexdigest()}))
"""


def _probe(capability: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=HANG,
                          env=environment(capability, MKL_VERBOSE="1", ONEDNN_VERBOSE="1", OMP_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


@pytest.mark.skipif(not (torch.backends.mkl.is_available() and torch.backends.mkldnn.is_available()),
                    reason="this torch's BLAS is not MKL, or it has no oneDNN")
def test_each_capability_runs_its_own_aten_mkl_and_onednn_kernels():
    native, native_log = _probe("native")
    assert "CNR:OFF" in native_log, native_log[-500:]  # MKL's own choice for this CPU
    for capability in capabilities():
        if capability == "native":
            continue
        found, log = _probe(capability)
        assert found["aten"] == capability.upper(), (capability, found)
        want = "CNR:COMPATIBLE" if capability == "default" else "CNR:"
        assert want in log and "CNR:OFF" not in log, (capability, log[-500:])
        isa = "isa:Intel SSE4.1" if capability == "default" else "isa:Intel AVX2"
        assert isa in log, (capability, [line for line in log.splitlines() if "isa:" in line])
    generic, _ = _probe("default")
    assert generic["bits"] != native["bits"], "MKL's generic branch rounds this matmul as this CPU's own does"
