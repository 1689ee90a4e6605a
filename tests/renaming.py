"""A module's children renamed as another modeling file would name them (issue 48's tests that a trait is measured,
not read off names)."""

from __future__ import annotations


def renamed(module, names: dict[str, str], classes: bool = False) -> None:
    """``module``'s children renamed (``names``: old -> new): the forward still reaches each by its old attribute (a
    property of a subclass), but no module is called by it any more. ``classes``: each child's class renamed too, so
    no "Norm", "Linear" or "Router" is left in a name."""
    cls = type(module)
    for old, new in names.items():
        module._modules[new] = module._modules.pop(old)
    module.__class__ = type(f"Renamed{cls.__name__}", (cls,),
                            {old: property(lambda self, new=new: self._modules[new]) for old, new in names.items()})
    if classes:
        for index, child in enumerate(module.children()):
            child.__class__ = type(f"Part{index}", (type(child),), {})
