"""The loads a page talks about: one way each to load the tiny checkpoint, labelled by what it got.

A page's support table says, per value, under which loads it is served. A load's label is what
transformers actually chose (``model.implementations``), not what was asked: a family that only
supports eager attention has no "sdpa" column, and a dense family no "experts eager" one.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.recipe.family import Family


@dataclass(frozen=True)
class Load:
    """One way to load the family: a label the page shows, the task and from_pretrained kwargs.

    A load with ``base`` reuses that load's model under ``context(model)``, a context manager
    (a kernel route, or "as if flash-linear-attention were installed"): routes are per family for
    the whole process, so they are entered around each use, never left on.
    """

    label: str
    task: str = "text-generation"
    kwargs: tuple[tuple[str, Any], ...] = ()
    base: str | None = None
    context: Callable[[Any], Any] | None = None

    def within(self, model: Any) -> Any:
        return self.context(model) if self.context is not None else contextlib.nullcontext()


def resolve_loads(family: Family, family_module: Any, checkpoint: Path) -> Models:
    """The loads the page talks about, each labelled by what it got: the default load (named by the
    attention implementation transformers chose), eager attention if that is another one, eager
    experts on a family with fused experts, the kernel routes of a DeltaNet family, and the
    multimodal task when the page has a vision encoder. The default load's model is kept."""
    default = load(family, family_module, checkpoint)
    got = default.implementations
    label = got["attn_implementation"]
    loads = [Load(label)]
    if label != "eager":
        loads.append(Load("eager", kwargs=(("attn_implementation", "eager"),)))
    if got.get("experts_implementation") not in (None, "eager"):
        loads.append(Load("experts eager", kwargs=(("experts_implementation", "eager"),)))
    if hasattr(family_module, "KERNELS"):  # a DeltaNet family: its kernel routes
        from nncanon.core import kernels

        loads += [Load('route_kernels "torch"', base=label,
                       context=lambda model: kernels.route_kernels(model.family, "torch")),
                  Load(f"{getattr(family_module, 'KERNEL_LIBRARY', 'flash-linear-attention')} installed", base=label,
                       context=lambda model: kernels.assume_fla(model.family))]
    if (family.get("page") or {}).get("vision"):
        loads.append(Load("image", task="image-text-to-text"))
        if getattr(family_module, "IMAGE_EAGER", False) and label != "eager":  # values only an image call has
            loads.append(Load("image eager", task="image-text-to-text", kwargs=(("attn_implementation", "eager"),)))
    models = Models(checkpoint, loads, lambda **kwargs: load(family, family_module, checkpoint, **kwargs))
    models._cache[label] = default
    return models


def load(family: Family, family_module: Any, checkpoint: Path, **kwargs: Any) -> Any:
    """``nncanon.load`` of the tiny checkpoint; a standard path that does not resolve on it is one ClaimError
    line naming the module looked for, what the block has instead and the family to start from."""
    import nncanon
    from generator.facts.unresolved import explain

    try:
        return nncanon.load(checkpoint, **kwargs)
    except nncanon.FamilyMismatch as error:
        raise explain(family.family, family_module, checkpoint, error) from None


class Models:
    """The tiny checkpoint loaded once per load, on demand; ``default`` is the first load's label."""

    def __init__(self, checkpoint: Path, loads: list[Load], loader: Callable[..., Any] | None = None):
        self.checkpoint = checkpoint
        self._load = loader
        self.loads = {load.label: load for load in loads}
        self.default = loads[0].label
        self._cache: dict[str, Any] = {}

    @property
    def all(self) -> list[Load]:
        return list(self.loads.values())

    def get(self, label: str) -> Any:
        load = self.loads[label]
        if load.base is not None:
            return self.get(load.base)
        if label not in self._cache:
            import nncanon

            loader = self._load or functools.partial(nncanon.load, self.checkpoint)
            self._cache[label] = loader(task=load.task, **dict(load.kwargs))
        return self._cache[label]

    def close(self) -> None:
        self._cache.clear()
