"""The decode cache under the name the installed transformers gives it: the model's ``cache_params`` (Mamba-2) or
``past_key_values`` up to 5.23, ``cache`` from 5.24 (the old names deprecated, and warning, until 5.40)."""

from __future__ import annotations

import inspect

NAMES = ("cache", "cache_params", "past_key_values")


def cache_kwarg(model) -> str:
    """The keyword the model's forward takes its cache under on this release."""
    params = inspect.signature(model._module.forward).parameters
    return next(name for name in NAMES if name in params)


def cache_of(output):
    """The cache a forward returned, under whichever name the release's output carries it."""
    fields = output.keys() if hasattr(output, "keys") else ()
    return next(output[name] for name in NAMES if name in fields and output[name] is not None)
