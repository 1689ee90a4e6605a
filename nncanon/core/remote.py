"""Standard values on NDIF: ``with model.trace(prompt, remote=True)``.

NDIF runs nnsight's own ``TransformersModel`` of the checkpoint; nncanon is not installed there. A
remote trace ships the trace body and the envoy tree it reads (nnsight pickles every envoy, with each
module and the interleaver as a persistent id the server resolves to its own, see
``Envoy.__getstate__``), so nncanon's host classes, values and views must travel by value:
`ship_by_value` registers the package with ``nnsight.register`` before the first remote trace. Two
things follow for nncanon's own code, checked by tests/test_remote.py:

- nnsight ships a function by its source and recompiles it at module level, where a zero-argument
  ``super()`` has no ``__class__`` cell: methods that run on the server name their class
  (``super(Host, self)``);
- a value's descriptor is a ``property``, which does not pickle: `ValueProperty` reduces to its `Value`.

On the server the shipped tree stands over the server's modules, which carry none of the hooks and
``.source`` ops a load installs; `run_on_server` installs them for the run (`StandardModel._bind`) and
takes the hooks off again, so the server's shared model is left as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class NotRemotable(ValueError):
    """A model NDIF cannot run (built from a local directory or a config): the message says what to load instead."""


def ship_by_value() -> None:
    """Register nncanon for pickling by value (``nnsight.register``), so a remote request carries it."""
    import sys

    import nnsight

    # the package this module belongs to: imported before any of its modules, so no import (and no circle)
    nnsight.register(sys.modules[__name__.partition(".")[0]])


def check_remote_key(model: Any) -> None:
    """A remote run names the model by its hub id: refuse a local directory in one line. Offline (the
    protocol tests, HF_HUB_OFFLINE=1) the id is taken as spelled, since the Hub cannot canonicalize it."""
    from huggingface_hub import constants
    from nnsight.modeling import huggingface

    source = model.__dict__.get("_source")
    if source is None or not source.hub:
        where = "a config alone" if source is None else f"the local directory {source.checkpoint}"
        raise NotRemotable(f"remote=True runs the model NDIF serves under a hub id; this one was built from {where}: "
                          "load it by its id, nncanon.load('org/name')")
    if constants.HF_HUB_OFFLINE:
        huggingface._ID_CACHE.setdefault(model.repo_id, model.repo_id)


class RemoteUnreachable(ConnectionError):
    """NDIF could not be reached: the message names the host and what to check (not websocket's bare DNS error)."""


def name_network_errors(backend: Any) -> Any:
    """``backend`` (nnsight's RemoteBackend) with a failure to reach its host raised as `RemoteUnreachable`."""
    from nnsight.intervention.backends.remote import RemoteBackend

    if type(backend) is not RemoteBackend:
        return backend
    backend.__class__ = _named_backend(RemoteBackend)
    return backend


_NAMED: dict[type, type] = {}


def _named_backend(base: type) -> type:
    if base not in _NAMED:
        def __call__(self: Any, tracer: Any = None) -> Any:
            try:
                return base.__call__(self, tracer)
            except Exception as error:
                if not _network(error):
                    raise
                raise RemoteUnreachable(
                    f"remote=True: NDIF at {self.host} cannot be reached ({type(error).__name__}: {error}); check the "
                    f"network, or the host (nnsight.CONFIG.API.HOST, or remote='https://...')") from None

        def __reduce_ex__(self: Any, protocol: Any) -> Any:
            # the request pickles its tracer's backend: the server (no nncanon there) gets nnsight's own class
            plain = object.__new__(base)
            plain.__dict__.update(self.__dict__)
            return plain.__reduce_ex__(protocol)

        _NAMED[base] = type("NamedRemoteBackend", (base,), {"__call__": __call__, "__reduce_ex__": __reduce_ex__})
    return _NAMED[base]


def _network(error: BaseException) -> bool:
    if isinstance(error, (ConnectionError, TimeoutError)) or type(error).__name__ == "gaierror":
        return True
    module = type(error).__module__ or ""
    return module.startswith(("websocket", "requests", "urllib3", "httpx", "socketio")) and (
        "Connection" in type(error).__name__ or "Address" in type(error).__name__ or "Timeout" in type(error).__name__)


def run_on_server(model: Any, interleave: Callable, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a shipped standard tree over the server's modules: bind them for the run, then unhook them."""
    modules = list(model._module.modules())
    before = [(m, set(m._forward_pre_hooks), set(m._forward_hooks)) for m in modules]
    model._bind()
    try:
        return interleave(fn, *args, **kwargs)
    finally:
        for module, pre, post in before:
            for key in set(module._forward_pre_hooks) - pre:
                del module._forward_pre_hooks[key]
                module._forward_pre_hooks_with_kwargs.pop(key, None)
            for key in set(module._forward_hooks) - post:
                del module._forward_hooks[key]
                module._forward_hooks_always_called.pop(key, None)
                module._forward_hooks_with_kwargs.pop(key, None)
        model.__dict__.pop("_bound", None)


__all__ = ["ship_by_value", "check_remote_key", "run_on_server", "NotRemotable", "RemoteUnreachable",
           "name_network_errors"]
