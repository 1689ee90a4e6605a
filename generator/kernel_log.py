"""The CPU kernels a tiny checkpoint's build and a family's collection run, and the fewest families that together
run every one.

A pin or a fact can differ between CPUs only where a kernel computes it: the same ATen operator on the same
dtypes dispatches to the same kernel on every family, and which of its builds runs (generic, AVX2, AVX-512) is the
CPU's choice, not the family's. So the capability comparison (tests/test_portable_facts.py, test_portable_pins.py)
need not build and collect every family again under every capability: it builds the checkpoints of one
:func:`cover` and collects the facts of another, each together running every kernel any family's build or
collection ran; a family whose kernels all lie in a cover adds none to compare.

The kernels are recorded while a checkpoint is built (into its manifest, generator/checkpoint/checkpoints.py) and
while the facts are collected natively (beside them), by a dispatch mode that names each operator and its tensor
arguments' dtypes and runs it unchanged (:func:`recording`); they are a fact no kernel changes
(``collect.KERNEL_FREE``), so a kernels-only collection leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path


@contextmanager
def recording(seen: set[str] | None = None) -> Iterator[set[str]]:
    """A set (``seen``, or a new one) filled, while the block runs, with ``"<operator>:<dtype>,..."`` for every
    ATen operator called. The mode costs about as much as the tiny models' arithmetic (a Python call per
    operator), so a collection records only the parts whose facts a kernel computes (``collect.KERNEL_FREE``)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = set() if seen is None else seen
    calls: set[tuple] = set()  # (operator, dtype, ...) as called: named once each when the block ends
    tensor = torch.Tensor

    class KernelLog(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls.add((func, *[a.dtype for a in args if isinstance(a, tensor)]))
            return func(*args, **(kwargs or {}))

    try:
        with KernelLog():
            yield seen
    finally:
        for func, *dtypes in calls:
            seen.add(f"{func}:{','.join(sorted({str(d).removeprefix('torch.') for d in dtypes}))}")


class KernelLog:
    """:func:`recording` into :attr:`ran` from its opening to its closing (when ``on``), except inside
    :meth:`paused`: a collection's parts whose facts no kernel computes (``collect.KERNEL_FREE``) are not recorded."""

    def __init__(self, on: bool) -> None:
        self.ran: set[str] = set()
        self.on = on
        self._stack = ExitStack()

    def open(self) -> None:
        if self.on:
            self._stack.enter_context(recording(self.ran))

    def close(self) -> None:
        self._stack.close()

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.close()
        try:
            yield
        finally:
            self.open()


def cover(kernels: dict[str, list[str]]) -> list[str]:
    """The families (sorted) whose kernels together are every family's: greedily the family that adds the most
    kernels not yet covered, the first by name on a tie, so the choice is the same on every machine. A family
    with no recorded kernels (facts older than the recording) is always in: nothing says what it runs."""
    left = {kernel for ran in kernels.values() for kernel in ran}
    chosen = sorted(name for name, ran in kernels.items() if not ran)
    while left:
        name = min(kernels, key=lambda n: (-len(left.intersection(kernels[n])), n))
        if not left.intersection(kernels[name]):
            break
        chosen.append(name)
        left -= set(kernels[name])
    return sorted(chosen)


def write_kernels(facts_dir: Path, family: str, ran: list[str]) -> None:
    """``<facts>/<family>.kernels``: the kernels its last native collection ran, one per line."""
    (facts_dir / f"{family}.kernels").write_text("".join(f"{kernel}\n" for kernel in ran), encoding="utf-8")


def read_kernels(facts_dir: Path, families: list[str]) -> dict[str, list[str]]:
    """Each family's recorded kernels; an empty list where none were recorded (which :func:`cover` always takes)."""
    out = {}
    for family in families:
        path = facts_dir / f"{family}.kernels"
        out[family] = path.read_text(encoding="utf-8").split() if path.is_file() else []
    return out
