"""The CPU kernels a family's collection runs, and the fewest families that together run every one.

A fact can differ between CPUs only where a kernel computes it: the same ATen operator on the same dtypes
dispatches to the same kernel on every family, and which of its builds runs (generic, AVX2, AVX-512) is the
CPU's choice, not the family's. So the capability comparison (tests/test_portable_facts.py) need not collect
every family again under every capability: it collects the families of :func:`cover`, which together run every
kernel any family's collection ran, and a family whose kernels all lie in the cover adds none to compare.

The kernels are recorded while the facts are collected natively (:func:`recording`), by a dispatch mode that
names each operator and its tensor arguments' dtypes and runs it unchanged; they are a fact no kernel changes
(``collect.KERNEL_FREE``), so a kernels-only collection leaves them out; the stages whose facts are kernel-free
(the edits) run outside the recording (:func:`unrecorded`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def recording() -> Iterator[set[str]]:
    """A set filled, while the block runs, with ``"<operator>:<dtype>,..."`` for every ATen operator called."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()

    class KernelLog(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            dtypes = sorted({str(a.dtype).removeprefix("torch.") for a in args if isinstance(a, torch.Tensor)})
            seen.add(f"{func}:{','.join(dtypes)}")
            return func(*args, **(kwargs or {}))

    with KernelLog():
        yield seen


@contextmanager
def unrecorded() -> Iterator[None]:
    """The block's operators left out of :func:`recording`'s set: for a stage whose facts hold no number (the
    edits: which value lands, never by how much), so no kernel can change them and none need comparing."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        yield


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
