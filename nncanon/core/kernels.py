"""The delta-rule kernels of DeltaNet families: which one runs, and where their values are served.

A DeltaNet forward calls one of two module-level kernels of its modeling module: the chunked
one on a prompt, the recurrent one on a cached single-token decode step. transformers binds
each name once, at import (``use_kernel_func_from_hub_with_fallback``): to
flash-linear-attention's fused kernel when ``fla`` imports, else to its own pure-torch
reference. nnsight names the two calls differently (and numbers them per call site), so no
``.source`` name stands for "the kernel this call runs" across a generate.

`tap` wraps both names in the modeling module once. The wrapper serves whichever kernel
runs at ``{linear_attn path}.kernel.input`` and ``.kernel.output``, one visit per call of the
block (what `tracer.iter` counts), and routes the call:

- ``"fla"`` (the default): the kernel transformers bound at import, unchanged — fla's when
  it is installed, else transformers' chunked (prompt) or recurrent (decode step) reference.
- ``"torch"``: every call, a prompt included, runs `token_by_token`, the pure-torch
  recurrent delta rule one token at a time. It serves the state after each token at
  ``{path}.state.output`` (one visit per token) and, when a worker is parked there, the
  stack of them at ``{path}.states.output`` (one visit per call, before ``kernel.output``).

The route is per family (`route_kernels`) and applies to the blocks of every model of that
family `track` has marked, in a trace or not. Mamba-2's scan kernels take the same route, with a
tap of their own (`nncanon.parts.recurrent.ssd`): the recurrent state is one concept across both mixers. Code that calls the kernels outside such a
block (a plain Hugging Face model of the same architecture) gets transformers' binding.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

KERNEL = "kernel"  #: the tap's location: ``{path}.kernel.input`` / ``.output``
STATE = "state"  #: the state after one token: ``{path}.state.output``, once per token
STATES = "states"  #: every token's state, stacked: ``{path}.states.output``, once per call
ROUTES = ("torch", "fla")
DEFAULT = "fla"

#: family -> route; a family absent here runs its default
_routes: dict[str, str] = {}
#: family -> the modeling modules its tracked DeltaNet blocks come from
_modeling: dict[str, set[ModuleType]] = {}
#: modeling module -> the kernel names tapped in it
_tapped: dict[ModuleType, tuple[str, ...]] = {}
#: (envoy, family) of the DeltaNet module whose forward is running, innermost last
_running: list[tuple[Any, str]] = []


# -- routing --------------------------------------------------------------------


@dataclass(frozen=True)
class Routing:
    """What `route_kernels` returns: already in effect; as a context manager, undone on exit."""

    family: str
    route: str
    previous: str

    def __enter__(self) -> Routing:
        return self

    def __exit__(self, *exc: Any) -> None:
        _routes[self.family] = self.previous


def route_kernels(family: str, route: str) -> Routing:
    """Route the delta-rule kernels of ``family``'s DeltaNet blocks.

    ``"torch"``: transformers' pure-torch recurrent delta rule, one token at a time, for
    prompts and decode steps alike. Every linear_attn value is served, and ``state`` and
    ``states`` exist. Slower than the chunked kernel on long prompts, and far slower than
    flash-linear-attention on a GPU. ``"fla"`` (the default): the kernels transformers
    bound at import — flash-linear-attention's when it is installed (then only
    attention_output is served), else its chunked and recurrent pure-torch references.

    ``family`` is the family name, ``model.family``. Takes effect at once, for every
    model of the family, until routed again; ``with route_kernels(...):`` undoes it on exit.
    """
    if not isinstance(family, str):
        raise TypeError(f"route_kernels takes the family name, e.g. route_kernels(model.family, {route!r}); "
                        f"got {type(family).__name__}")
    from ..families import FAMILIES

    if family not in FAMILIES:
        raise ValueError(f"route_kernels({family!r}, ...): no family {family!r}; nncanon knows "
                         f"{', '.join(FAMILIES)} (pass model.family)")
    if route not in ROUTES:
        raise ValueError(f"route_kernels({family!r}, {route!r}): the route is "
                         f"{' or '.join(repr(r) for r in ROUTES)}")
    previous = _routes.get(family, DEFAULT)
    _routes[family] = route
    return Routing(family, route, previous)


def route(family: str) -> str:
    """The route ``family``'s DeltaNet blocks run now: ``"torch"`` or ``"fla"``."""
    return _routes.get(family, DEFAULT)


def bound(fn: Callable) -> Callable:
    """The implementation transformers bound at import behind the kernel name ``fn``.

    ``use_kernel_func_from_hub_with_fallback`` keeps it in its wrapper's closure as
    ``implementation``: flash-linear-attention's function, or the torch reference itself.
    """
    fn = getattr(fn, "__nncanon_tap__", fn)
    closure = inspect.getclosurevars(fn).nonlocals if getattr(fn, "__closure__", None) else {}
    return closure.get("implementation", fn)


def reference(fn: Callable) -> Callable:
    """The pure-torch reference behind the kernel name ``fn`` (under every wrapper)."""
    return inspect.unwrap(fn)


def fla_bound(family: str) -> bool:
    """Whether transformers bound a fused kernel (flash-linear-attention's) for ``family``'s blocks.

    False until a model of the family is loaded (its modeling modules are known then). The
    binding is made once, at the modeling module's import, so it is looked up once per module.
    Inside `assume_fla` it is what that says.
    """
    if family in _assumed:
        return _assumed[family]
    return any(_fused(modeling) for modeling in _modeling.get(family, ()))


#: family -> what `assume_fla` makes fla_bound answer
_assumed: dict[str, bool] = {}


@contextlib.contextmanager
def assume_fla(family: str, installed: bool = True) -> Iterator[None]:
    """Evaluate availability as if flash-linear-attention were (or were not) installed.

    For documentation (the encyclopedia's "with fla installed" column) and tests: only the
    answer of `fla_bound`, and so the values' conditions and ``support()``, change; the
    kernels that run do not.
    """
    previous = _assumed.get(family)
    _assumed[family] = installed
    try:
        yield
    finally:
        if previous is None:
            _assumed.pop(family, None)
        else:
            _assumed[family] = previous


#: modeling module -> whether a fused kernel is bound there; a dict, not functools.cache: an lru_cache
#: pickles by reference, and a remote trace ships this module by value to a server without nncanon
_FUSED: dict[ModuleType, bool] = {}


def _fused(modeling: ModuleType) -> bool:
    if modeling not in _FUSED:
        _FUSED[modeling] = any(bound(getattr(modeling, name)) is not reference(getattr(modeling, name))
                               for name in _tapped.get(modeling, ()))
    return _FUSED[modeling]


def torch_kernels_run(family: str) -> bool:
    """Whether ``family``'s blocks run a pure-torch kernel: routed to torch, or fla not bound."""
    return route(family) == "torch" or not fla_bound(family)


# -- the token-by-token kernel --------------------------------------------------------


def l2norm(x: torch.Tensor, dim: int = -1, eps: float = 1e-6) -> torch.Tensor:
    """transformers' (and fla's) l2 norm, for a modeling module that has none of its own."""
    return x * torch.rsqrt((x * x).sum(dim=dim, keepdim=True) + eps)


def _wanted(interleaver: Any, provider: str) -> bool:
    """Whether this visit of ``provider`` will be served to a worker or recorded by a cache.

    The fast path of `Interleaver.handle` (``provider not in parked and not observers``)
    first; then whether a worker parked there waits for this very occurrence (one waiting
    for a later generation step is not served now).
    """
    if interleaver.observers.get(provider):
        return True
    return provider in interleaver.parked and bool(interleaver._ready(provider))


def token_by_token(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    cu_seqlens: Any = None,
    seq_idx: Any = None,
    *,
    norm: Callable = l2norm,
    serve: tuple[Any, str] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The gated delta rule one token at a time: transformers' ``torch_recurrent_gated_delta_rule``.

    The same arguments, the same operations in the same order (so the same result to the
    bit), with the state after each token handed out as it is made. ``serve`` is
    ``(interleaver, path)`` in a trace: each token's state is served at
    ``{path}.state.output`` before the token's output is read from it (so an edit lands in
    this token's output and every later one), and the stack of them at
    ``{path}.states.output`` when someone reads it. ``chunk_size`` (the chunked kernel's
    argument) is accepted and ignored.
    """
    if cu_seqlens is not None or seq_idx is not None:
        raise ValueError("the token-by-token delta rule (route_kernels(family, 'torch')) cannot keep packed "
                         "sequences apart (cu_seqlens); route back with route_kernels(family, 'fla') and install "
                         "flash-linear-attention")
    initial_dtype = query.dtype
    batch_size, sequence_length, num_k_heads, k_head_dim = key.shape
    num_v_heads, v_head_dim = value.shape[-2:]
    if num_k_heads != num_v_heads:
        query = query.repeat_interleave(num_v_heads // num_k_heads, dim=2)
        key = key.repeat_interleave(num_v_heads // num_k_heads, dim=2)
    query, key, value, beta, decay = [
        x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
        for x in (query, key, value, beta, g)
    ]
    if use_qk_l2norm_in_kernel:
        query = norm(query, dim=-1, eps=1e-6)
        key = norm(key, dim=-1, eps=1e-6)
    query = query / (query.shape[-1] ** 0.5)

    if initial_state is None:
        state = torch.zeros((batch_size, num_v_heads, k_head_dim, v_head_dim), dtype=value.dtype,
                            device=value.device)
    else:
        state = initial_state.to(value)
    core_attn_out = torch.zeros_like(value)

    interleaver, path = serve if serve is not None else (None, "")
    at_state, at_states = f"{path}.{STATE}.output", f"{path}.{STATES}.output"
    # Keep every token's state only when it will be read: a worker parked on `states` of
    # this call, or on `state` (which it may leave for `states` after a token).
    keep = interleaver is not None and (_wanted(interleaver, at_states) or at_state in interleaver.parked)
    kept: list[torch.Tensor] = []
    for i in range(sequence_length):
        q_t, k_t, v_t = query[:, :, i], key[:, :, i], value[:, :, i]
        state = state * decay[:, :, i].exp()[..., None, None]
        beta_t = beta[:, :, i].unsqueeze(-1)
        kv_mem = (state * k_t.unsqueeze(-1)).sum(dim=-2)
        delta = (v_t - kv_mem) * beta_t
        state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)
        if interleaver is not None:
            state = interleaver.handle(at_state, state)
        if keep:
            kept.append(state)
        core_attn_out[:, :, i] = (state * q_t.unsqueeze(-1)).sum(dim=-2)

    if interleaver is not None:
        states = None
        if _wanted(interleaver, at_states):
            if not keep:  # a worker reached `states` another way (a barrier): run the recurrence again
                kept = _states(query, key, value, beta, decay, initial_state)
            states = _stack(kept)
        # Visited (and so counted) whether read or not, so tracer.iter's steps stay aligned.
        interleaver.handle(at_states, states)
        del kept

    core_attn_out = core_attn_out.transpose(1, 2).contiguous().to(initial_dtype)
    return core_attn_out, (state if output_final_state else None)


def _stack(states: list[torch.Tensor]) -> torch.Tensor:
    """``states``, the value read at ``{path}.states.output``: [batch, seq, heads, key_dim, value_dim]."""
    return torch.stack(states, dim=1)


def _states(query, key, value, beta, decay, initial_state) -> list[torch.Tensor]:
    """Every token's state, recomputed from prepared [batch, heads, seq, dim] float32 inputs."""
    batch_size, heads, sequence_length, k_head_dim = key.shape
    state = (torch.zeros((batch_size, heads, k_head_dim, value.shape[-1]), dtype=value.dtype, device=value.device)
             if initial_state is None else initial_state.to(value))
    states = []
    for i in range(sequence_length):
        k_t, v_t = key[:, :, i], value[:, :, i]
        state = state * decay[:, :, i].exp()[..., None, None]
        delta = (v_t - (state * k_t.unsqueeze(-1)).sum(dim=-2)) * beta[:, :, i].unsqueeze(-1)
        state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)
        states.append(state)
    return states


# -- the tap ------------------------------------------------------------------------


def _innermost() -> tuple[Any, str]:
    """The running DeltaNet's (envoy, family); of two models wrapping one module, the one in a trace."""
    envoy, family = _running[-1]
    if not envoy.interleaver.interleaving:
        for other, other_family in reversed(_running):
            if other._module is not envoy._module:
                break
            if other.interleaver.interleaving:
                return other, other_family
    return envoy, family


def _served(fn: Callable, norm: Callable) -> Callable:
    @functools.wraps(fn)
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if not _running:
            return fn(*args, **kwargs)
        envoy, family = _innermost()
        token_route = _routes.get(family, DEFAULT) == "torch"
        interleaver, path = envoy.interleaver, envoy.path
        if not interleaver.interleaving:
            return token_by_token(*args, norm=norm, **kwargs) if token_route else fn(*args, **kwargs)
        if kwargs.get("initial_state") is not None:
            # The cache's buffer is overwritten in place after the call: serve a copy.
            kwargs["initial_state"] = kwargs["initial_state"].clone()
        args, kwargs = interleaver.handle(f"{path}.{KERNEL}.input", (args, kwargs))
        if token_route:
            out = token_by_token(*args, norm=norm, serve=(interleaver, path), **kwargs)
        else:
            out = fn(*args, **kwargs)
        return interleaver.handle(f"{path}.{KERNEL}.output", out)

    kernel.__nncanon_tap__ = fn
    return kernel


def tap(modeling: ModuleType, names: tuple[str, ...]) -> None:
    """Wrap the kernel functions ``names`` of the modeling module (once; idempotent)."""
    norm = getattr(modeling, "l2norm", l2norm)
    for name in names:
        fn = getattr(modeling, name)
        if not hasattr(fn, "__nncanon_tap__"):
            setattr(modeling, name, _served(fn, norm))
    tapped(modeling, names)


def tapped(modeling: ModuleType, names: tuple[str, ...]) -> None:
    """Record that ``names`` of ``modeling`` are tapped (by `tap`, or a mixer's own tap: Mamba-2's), so
    `fla_bound` asks whether a fused kernel is bound behind them."""
    _tapped[modeling] = tuple(dict.fromkeys((*_tapped.get(modeling, ()), *names)))
    _FUSED.clear()


def track(envoy: Any) -> None:
    """Mark ``envoy``'s module as the running DeltaNet of its family while its forward runs."""
    family = envoy._std_model.family
    _modeling.setdefault(family, set()).add(inspect.getmodule(type(envoy._module)))

    def enter(module: torch.nn.Module, args: Any) -> None:
        _running.append((envoy, family))

    def leave(module: torch.nn.Module, args: Any, output: Any) -> None:
        _running.pop()

    envoy._module.register_forward_pre_hook(enter)
    envoy._module.register_forward_hook(leave, always_call=True)


__all__ = ["route_kernels", "route", "Routing", "ROUTES", "bound", "reference", "fla_bound", "assume_fla",
           "torch_kernels_run", "token_by_token", "tap", "track"]
