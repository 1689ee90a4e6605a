"""A forward's operator graph: the ATen operators it dispatches, in order, each with the operators that last wrote
the storage of each tensor it reads.

Whether an edit lands is a question of storage, not of numbers: a write into the value's tensor lands where a later
operator reads that storage, and a replaced tensor lands where later operators read the replacement. Both follow
from which operators run, in which order, reading which storage: the graph. Two loads whose forwards dispatch the
same graph (the same operators, each reading the storage the same earlier operator wrote) hand every edited tensor
to the same readers, so an edit lands in one exactly where it lands in the other; the dtypes differ only in the
numbers in those storages. A dtype-dependent branch (``if x.dtype == torch.float16``, a cast to a named dtype that
is nothing in one dtype and a copy in the other) shows as a different graph. generator/facts/dtypes.py proves the
edits at float16 and, where bfloat16's graph is float16's, takes them for bfloat16's.
"""

from __future__ import annotations

from typing import Any


def op_graph(model: Any, args: tuple, kwargs: dict, steps: int = 0) -> list[tuple[str, tuple[int, ...]]]:
    """``model``'s graph on one trace of ``args`` (``steps``: a ``steps``-token generate instead, whose decode steps
    run the cache's code too): each operator's name and, for each tensor it reads, the index of the operator that
    last wrote its storage (a parameter or buffer: minus one minus its index; an input: -1)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    native = model._module
    # a storage's address -> the operator that last wrote it; the parameters' are named by their place
    writer = {t.untyped_storage().data_ptr(): -2 - n
              for n, t in enumerate([*native.parameters(), *native.buffers()])}
    kept: list = []  # every tensor the forward made, alive to its end, so no address is reused for another
    ops: list[tuple[str, tuple[int, ...]]] = []

    def tensors(tree: Any) -> list:
        return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]

    class Graph(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            reads = tuple(writer.get(t.untyped_storage().data_ptr(), -1) for t in tensors((args, kwargs)))
            ops.append((str(func), reads))
            for t in tensors(out):
                kept.append(t)
                writer[t.untyped_storage().data_ptr()] = len(ops) - 1
            return out

    with torch.no_grad(), Graph():
        if steps:
            with model.generate(*args, max_new_tokens=steps, min_new_tokens=steps, do_sample=False, **kwargs):
                pass
        else:
            with model.trace(*args, **kwargs):
                model.logits.save()
    return ops
