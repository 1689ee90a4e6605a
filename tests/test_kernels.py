"""The kernel log and the cover the capability comparison collects (generator/kernel_log.py), checked on plain
torch calls and small hand-made sets, not on the collection that uses them."""

from __future__ import annotations

import torch

from generator.kernel_log import cover, read_kernels, recording, write_kernels


def test_the_log_names_each_operator_with_its_dtypes_and_changes_no_result():
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with recording() as ran:
        out = torch.softmax(a @ a.T, dim=-1)
        n = torch.arange(3) * 2
    assert torch.equal(out, torch.softmax(a @ a.T, dim=-1)) and torch.equal(n, torch.tensor([0, 2, 4]))
    assert "aten.mm.default:float32" in ran and "aten._softmax.default:float32" in ran
    assert "aten.mul.Tensor:int64" in ran
    with recording() as later:
        pass
    assert not later  # nothing leaks from one log into the next


def test_the_cover_runs_every_kernel_with_the_fewest_families_the_same_on_every_run():
    kernels = {"a": ["mm", "add"], "b": ["mm", "add", "sin"], "c": ["cos"], "d": ["sin", "cos"], "e": ["add"]}
    chosen = cover(kernels)
    assert chosen == ["b", "c"]  # b runs the most; then c and d each add cos, and c is first by name
    assert chosen == cover(dict(reversed(list(kernels.items()))))  # ties broken by name, not by order
    assert {k for name in chosen for k in kernels[name]} == {"mm", "add", "sin", "cos"}


def test_a_family_with_no_recorded_kernels_is_always_compared(tmp_path):
    write_kernels(tmp_path, "a", ["mm", "add"])
    kernels = read_kernels(tmp_path, ["a", "old"])
    assert kernels == {"a": ["mm", "add"], "old": []}
    assert cover(kernels) == ["a", "old"]
