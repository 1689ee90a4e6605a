"""The delta-rule kernels of DeltaNet families, and the point where their values are served.

A DeltaNet forward calls one of two module-level kernels: the chunked one on a prompt, the
recurrent one on a cached single-token decode step. nnsight names those two calls
differently (and numbers them per call site), so no ``.source`` name stands for "the
kernel this call runs" across a generate. `tap` wraps both functions in the modeling
module once, so whichever runs is served at ``{linear_attn path}.kernel.input`` and
``.kernel.output``, one visit per call of the block — which is what `tracer.iter` counts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

#: (interleaver, path) of the DeltaNet module whose forward is running, innermost last
_running: list[tuple[Any, str]] = []

KERNEL = "kernel"


def _served(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if not _running:
            return fn(*args, **kwargs)
        interleaver, path = _running[-1]
        if not interleaver.interleaving:
            return fn(*args, **kwargs)
        args, kwargs = interleaver.handle(f"{path}.{KERNEL}.input", (args, kwargs))
        return interleaver.handle(f"{path}.{KERNEL}.output", fn(*args, **kwargs))

    kernel.__nncanon_tap__ = fn
    return kernel


def tap(modeling: Any, names: tuple[str, ...]) -> None:
    """Wrap the kernel functions ``names`` of the modeling module (once; idempotent)."""
    for name in names:
        fn = getattr(modeling, name)
        if not hasattr(fn, "__nncanon_tap__"):
            setattr(modeling, name, _served(fn))


def track(envoy: Any) -> None:
    """Mark ``envoy``'s module as the running DeltaNet while its forward runs."""

    def enter(module: torch.nn.Module, args: Any) -> None:
        _running.append((envoy.interleaver, envoy.path))

    def leave(module: torch.nn.Module, args: Any, output: Any) -> None:
        _running.pop()

    envoy._module.register_forward_pre_hook(enter)
    envoy._module.register_forward_hook(leave, always_call=True)
