"""The CPU kernels the portability tests run under."""

from __future__ import annotations


def capabilities() -> list[str]:
    """This machine's own kernels ("native"), the generic ones, and AVX2's where the native ones are wider
    (AVX-512): the three kinds of machine the site is built on. On an AVX2 machine native is AVX2's."""
    import torch

    native = torch.backends.cpu.get_cpu_capability()
    return ["native", "default"] + (["avx2"] if native not in ("AVX2", "DEFAULT") else [])
