"""A standard weight: a plain attribute of a host class (``W_Q``, ``attention_norm_w``, ...) whose read is a view
of a parameter, and whose assignment is copied into it, checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .norm_forms import WeightUnavailable


class WeightTypeError(TypeError):
    """A weight assigned what is not a real tensor (or nested lists of numbers) it can hold."""


class Weight:
    """A plain attribute of a host class: a view of a parameter, read or assigned outside any trace."""

    def __init__(self, name: str, dims: str, description: str, read: Callable[[Any], Any]) -> None:
        self.name, self.dims, self.description, self.read = name, dims, description, read
        self.__doc__ = f"{name} [{dims}]: {description}"

    def __reduce__(self) -> tuple:
        # a host class shipped by value to NDIF (nncanon.core.remote) carries its weights as their data: a lookup by name
        # would need this module's globals, which code shipped by value does not bring
        return type(self), (self.name, self.dims, self.description, self.read)

    def __get__(self, host: Any, owner: Any = None) -> Any:
        if host is None:
            return self
        try:
            return self.read(host)
        except AttributeError as error:  # raised from a getter it would resurface as a bare "has no attribute"
            family = getattr(host._std_model, "family", "this family")
            raise WeightUnavailable(f"{host._standard_path()}.{self.name} is unavailable on {family}: its "
                                    f"{type(host._module).__name__} has no parameter nncanon maps to it ({error})") from None

    def __set__(self, host: Any, new: Any) -> None:
        current = self.read(host)
        where = f"{host._standard_path()}.{self.name}"
        if current is None:
            raise WeightUnavailable(f"{where} cannot be assigned: the model has no such parameter (a bias its "
                                    f"projection does not have)")
        try:
            new = torch.as_tensor(new)
        except (TypeError, ValueError, RuntimeError):  # torch says "new(): invalid data type 'str'"
            raise WeightTypeError(f"{where} = {type(new).__name__}: assign a tensor of shape {list(current.shape)} "
                                  f"({current.dtype}), or nested lists of numbers") from None
        if new.is_complex() and not current.is_complex():  # copy_ would drop the imaginary part without a word
            raise WeightTypeError(f"{where} is {current.dtype}; the assigned tensor is {new.dtype}, whose imaginary "
                                  f"part would be dropped: assign tensor.real if that is meant")
        if tuple(new.shape) != tuple(current.shape):
            raise ValueError(f"{where} is [{self.dims}] = {list(current.shape)}; got {list(new.shape)}")
        with torch.no_grad():
            current.copy_(new)
