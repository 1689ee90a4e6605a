"""The CPU kernels the portability tests run under."""

from __future__ import annotations

import os

#: MKL's kernels, chosen per run as ATen's are: ATEN_CPU_CAPABILITY picks only ATen's own vector code, while a
#: matmul runs in MKL, which picks by CPUID whatever ATen is told. MKL_CBWR=COMPATIBLE is its generic branch: a
#: relation that says "0" only because two different BLAS calls round alike on this CPU differs there (gpt2's
#: c_fc as x @ W + b beside Conv1D's addmm did)
_MKL = {"default": "COMPATIBLE", "avx2": "AVX2"}
#: oneDNN's too: it runs the convolutions (Mamba's, DeltaNet's conv1d) and picks its ISA by CPUID as MKL does
_ONEDNN = {"default": "SSE41", "avx2": "AVX2"}


def capabilities() -> list[str]:
    """This machine's own kernels ("native"), the generic ones, and AVX2's where the native ones are wider
    (AVX-512): the three kinds of machine the site is built on. On an AVX2 machine native is AVX2's."""
    import torch

    native = torch.backends.cpu.get_cpu_capability()
    return ["native", "default"] + (["avx2"] if native not in ("AVX2", "DEFAULT") else [])


def environment(capability: str, **extra: str) -> dict[str, str]:
    """This process's environment with the kernels of ``capability`` (ATen's, MKL's, oneDNN's) and ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", *extra)}
    if capability != "native":
        env.update(ATEN_CPU_CAPABILITY=capability, MKL_CBWR=_MKL[capability], ONEDNN_MAX_CPU_ISA=_ONEDNN[capability])
    env.update(extra)
    return env
