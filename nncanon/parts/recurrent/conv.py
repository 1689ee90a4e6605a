"""The conv state: what the cache keeps of a mixer's causal convolution, one concept across Mamba-2 and DeltaNet.

Both mixers run their projected channels through a short causal depthwise convolution before the scan
(Mamba-2: x, B and C, ``conv_kernel`` / ``mamba_d_conv`` wide; the gated DeltaNet: q, k and v,
``linear_conv_kernel_dim`` wide). A decode step sees one new column, so the cache keeps the conv's input
at the last ``conv_kernel`` positions: transformers' conv state, ``ConvState [batch conv_dim conv_kernel]``.
``conv_dim`` is the channels in the projection's order (Mamba-2's x, B, C; the DeltaNet's q, k, v: the
family's split), ``conv_kernel`` the positions, oldest first, zeros on the left where the sequence is
shorter. The next step convolves ``conv_state[..., 1:]`` and its own column, and keeps the last
``conv_kernel`` columns of the two. ``conv_state_input`` is the state a call starts from (None at the
start of a prompt), ``conv_state_output`` the state it leaves in the cache, as ``state_input`` and
``state_output`` are the recurrent state's.

A forward calls one of two module-level functions of its modeling module: ``causal_conv1d_fn`` on a
prompt (after the cache's ``update_conv_state``, which hands it the previous state's columns and the
call's own, or zeros on the left), ``causal_conv1d_update`` on a cached decode step (which updates the
cache's buffer in place). `tap` wraps both and serves one call shape at ``{mixer path}.conv.input`` and
``.output`` whichever runs: ``((columns, conv_state_input), {})`` with ``columns`` the call's own
``[batch, conv_dim, seq]``, and ``(output, conv_state_output)`` with ``output`` the activated conv over
them. What is served is a copy; the served state, edited or not, is what the conv runs from and what
the cache keeps. Neither function depends on a kernel route: the values exist under every load.

The cache reaches the mixer under the name its release gives it: ``cache_params`` (the mixer's own name up to
5.23), ``cache`` (5.24 renamed both ``cache_params`` and ``past_key_values`` to it, the old names deprecated
until 5.40) or ``past_key_values``. A release whose mixer takes none of them makes both values `Unavailable`
naming the release (`prepare`): without the cache, ``conv_state_input`` would read None on a decode step
(which looks legitimate) and an edit of ``conv_state_output`` would never reach it.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ...core import kernels
from ...core.layouts import layout
from ...core.locators import Tap
from ...core.relations import relation
from ...core.values import Value
from ...core.views import READ_ONLY
from ...guards import releases

KERNELS = ("causal_conv1d_fn", "causal_conv1d_update")
CONV = "conv"  #: the tap's location: ``{path}.conv.input`` / ``.output``
CONV_STATES = "conv_states"  #: every token's window, served at ``{path}.conv_states.output`` when read

ConvState = layout("ConvState", "batch conv_dim conv_kernel")
MaybeConvState = layout("ConvState | None", "batch conv_dim conv_kernel")
ConvStates = layout("ConvStates", "batch seq conv_dim conv_kernel")

#: the names releases give the mixer's cache argument, the newest first (5.24: ``cache``)
CACHE_ARGS = ("cache", "cache_params", "past_key_values")


#: mixer class -> its cache argument; a dict, not functools.cache: an lru_cache wrapper pickles by reference, and
#: NDIF (no nncanon there) unpickles this module's functions from their source (nncanon/core/remote.py)
_CACHE_ARG: dict[type, str | None] = {}


def cache_arg(mixer_class: type) -> str | None:
    """The name ``mixer_class.forward`` takes its cache under on the installed release, or None."""
    if mixer_class not in _CACHE_ARG:
        params = inspect.signature(mixer_class.forward).parameters  # follows deprecate_kwarg's wraps
        _CACHE_ARG[mixer_class] = next((name for name in CACHE_ARGS if name in params), None)
    return _CACHE_ARG[mixer_class]


_CONV = "the causal convolution this call runs (a prompt's over every column or a decode step's one-column update)"


def conv_arg(element) -> Tap:
    return Tap(io="input", element=element, name=CONV, described=_CONV)


def conv_out(element) -> Tap:
    return Tap(io="output", element=element, name=CONV, described=_CONV)


def conv_values(channels: str, note=None) -> list[Value]:
    """The two conv state values of a mixer whose conv reads ``channels`` (its projection's order)."""
    return [
        Value("conv_state_input", MaybeConvState,
              f"The conv state entering the layer: the conv's input ({channels}) at the last conv_kernel positions of "
              "the past, or None at the start of a prompt (a copy of the cache's buffer)", conv_arg(1),
              no_grad="None on a prompt; on a decode step a copy of the cache's buffer, and generate runs without "
                      "gradients"),
        Value("conv_state_output", ConvState,
              f"The conv state leaving the layer: the conv's input ({channels}) at the last conv_kernel positions "
              "(zeros on the left where the sequence is shorter), what the next call convolves with its own column",
              conv_out(1), reaches="the next call", note=note),
    ]


def conv_states_value(channels: str, note=None) -> Value:
    """``conv_states``: the conv state after every token of the call (a mixer whose only state is its window)."""
    return Value("conv_states", ConvStates,
                 f"The conv state after every token of this call: the conv's input ({channels}) at the last "
                 "conv_kernel positions up to and including that token; conv_states[:, -1] is conv_state_output; "
                 "read-only", Tap(io="output", element=None, name=CONV_STATES,
                                  described="the causal convolution's windows, every token's stacked"),
                 view=READ_ONLY, note=note,
                 no_grad="a stack of every token's window made for the reader; the forward convolves conv_input "
                         "(read it for the gradient)")


def _windows(window: torch.Tensor, before: int, seq: int, kernel: int) -> torch.Tensor:
    """``[batch, seq, conv_dim, kernel]``: the last ``kernel`` columns of ``window`` up to each of its last ``seq``
    columns (``before`` columns precede them), zeros on the left where shorter."""
    padded = F.pad(window, (kernel, 0)).unfold(-1, kernel, 1)  # [b, c, len + 1, kernel]: index i ends at column i-1
    return padded[:, :, before + 1:before + 1 + seq].permute(0, 2, 1, 3).clone()


def _serve_windows(interleaver: Any, path: str, make) -> None:
    at = f"{path}.{CONV_STATES}.output"
    if kernels._wanted(interleaver, at):  # built only when read: seq x conv_dim x conv_kernel per block
        interleaver.handle(at, make())


# -- the tap ---------------------------------------------------------------------------------------------


@dataclass
class _Call:
    """What the convolution cannot see of its mixer's call: how many columns are the call's own, a copy of the
    cache's conv state from before the call (a prompt's ``update_conv_state`` overwrites it before the conv runs),
    and the cache, which keeps the served state."""

    seq: int
    previous: torch.Tensor | None
    cache: Any
    #: why this release's cache cannot be read: the tap stands aside rather than serve a wrong state
    problem: str | None = None


#: mixer module -> its running call
_calls: dict[torch.nn.Module, _Call] = {}


def _last(x: torch.Tensor, kernel: int) -> torch.Tensor:
    """The last ``kernel`` columns of ``x``, zeros on the left where it is shorter: a fresh tensor."""
    return F.pad(x, (max(0, kernel - x.shape[-1]), 0))[..., -kernel:].clone()


def _running() -> tuple[Any, _Call] | None:
    """The running mixer's envoy and call, when a trace serves it."""
    if not kernels._running:
        return None
    envoy, _ = kernels._innermost()
    call = _calls.get(envoy._module)
    if call is None or not envoy.interleaver.interleaving:
        return None
    if call.problem:  # `prepare` made the values Unavailable; the rest of the trace runs as transformers' own
        return None
    return envoy, call


def _tap_fn(fn):
    @functools.wraps(fn)
    def conv_fn(hidden_states, weight, bias=None, activation=None, **rest):
        running = _running()
        if running is None:
            return fn(hidden_states, weight, bias=bias, activation=activation, **rest)
        envoy, call = running
        interleaver, path, kernel = envoy.interleaver, envoy.path, weight.shape[-1]
        length = hidden_states.shape[-1]
        columns = hidden_states[..., length - call.seq:]
        given = None if call.previous is None else call.previous[..., -kernel:].clone()
        (own, previous), _ = interleaver.handle(f"{path}.{CONV}.input", ((columns, given), {}))
        edited = own is not columns or previous is not given or (
            given is not None and not torch.equal(given, call.previous[..., -kernel:]))
        window = own if previous is None else torch.cat([previous.to(own), own], dim=-1)
        # unedited, the values of the very call the forward makes (the cache's columns), so the output is
        # transformers' to the bit; built from the served columns, so the gradient reaches what was served
        run = window if edited else own if length == call.seq else torch.cat(
            [hidden_states[..., :length - call.seq], own], dim=-1)
        full = fn(run, weight, bias=bias, activation=activation, **rest)
        out, state = interleaver.handle(f"{path}.{CONV}.output", (full[..., -call.seq:], _last(window, kernel)))
        before = 0 if previous is None else previous.shape[-1]
        _serve_windows(interleaver, path, lambda: _windows(window, before, own.shape[-1], kernel))
        if call.cache is not None:  # the served state, edited or not, is what the cache keeps
            buffer = call.cache.get_conv_state(envoy._module.layer_idx)
            size = min(kernel, buffer.shape[-1])
            buffer[..., -size:].copy_(state[..., -size:])
        if out.shape[-1] == length:
            return out
        return F.pad(out, (length - out.shape[-1], 0))  # the caller cuts a cached call to its own columns

    conv_fn.__nncanon_tap__ = fn
    return conv_fn


def _tap_update(fn):
    @functools.wraps(fn)
    def conv_update(hidden_states, conv_state, weight, bias=None, activation=None):
        running = _running()
        if running is None:
            return fn(hidden_states, conv_state, weight, bias, activation)
        envoy, _ = running
        interleaver, path = envoy.interleaver, envoy.path
        (own, previous), _ = interleaver.handle(f"{path}.{CONV}.input", ((hidden_states, conv_state.clone()), {}))
        conv_state.copy_(previous if previous is not None else torch.zeros_like(conv_state))
        out = fn(own, conv_state, weight, bias, activation)  # updates conv_state in place
        out, state = interleaver.handle(f"{path}.{CONV}.output", (out, conv_state.clone()))
        conv_state.copy_(state)
        _serve_windows(interleaver, path, lambda: conv_state.clone()[:, None])
        return out

    conv_update.__nncanon_tap__ = fn
    return conv_update


def tap(modeling: Any) -> None:
    """Wrap ``modeling``'s two convolution functions (once; idempotent)."""
    for name, wrap in zip(KERNELS, (_tap_fn, _tap_update)):
        fn = getattr(modeling, name)
        if not hasattr(fn, "__nncanon_tap__"):
            setattr(modeling, name, wrap(fn))


def track(envoy: Any) -> None:
    """Record, while ``envoy``'s mixer runs, what its convolution cannot see (`_Call`). Call after
    `kernels.track`, which marks the mixer as running."""
    params = list(inspect.signature(type(envoy._module).forward).parameters)[1:]

    def enter(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        bound = dict(zip(params, args)) | kwargs
        # a caller may still pass a deprecated name: the hook runs before deprecate_kwarg renames it
        hidden = bound["hidden_states"]
        cache = next((bound[name] for name in CACHE_ARGS if bound.get(name) is not None), None)
        if cache is not None and not hasattr(cache, "get_conv_state"):
            problem = f"{releases.named()}'s {type(cache).__name__} has no get_conv_state"
            _calls[module] = _Call(hidden.shape[1], None, None, problem)
            return
        state = None if cache is None else cache.get_conv_state(module.layer_idx)
        _calls[module] = _Call(hidden.shape[1], None if state is None else state.clone(), cache)

    def leave(module: torch.nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        _calls.pop(module, None)

    envoy._module.register_forward_pre_hook(enter, with_kwargs=True)
    envoy._module.register_forward_hook(leave, with_kwargs=True, always_call=True)


def prepare(model: Any, modeling: Any, host_class: type) -> None:
    tap(modeling)
    for envoy in model._hosts:
        if isinstance(envoy, host_class):
            track(envoy)
            missing = None
            if cache_arg(type(envoy._module)) is None:
                missing = (f"{releases.named()}'s {type(envoy._module).__name__}.forward takes its cache under none "
                           f"of the names nncanon reads ({', '.join(CACHE_ARGS)}), so the conv state it keeps cannot "
                           "be found")
            elif lacking := [c.__name__ for c in _cache_classes(modeling) if not hasattr(c, "get_conv_state")]:
                missing = (f"{releases.named()}'s {', '.join(lacking)} has no get_conv_state, which nncanon reads "
                           "the conv state through")
            for name in ("conv_state_input", "conv_state_output"):
                if missing:
                    model._missing_ops[(type(envoy), name)] = missing


def _cache_classes(modeling: Any) -> list[type]:
    """The cache classes a modeling module's mixers are handed: its own (an older release's per-family cache),
    else transformers' DynamicCache."""
    from transformers import DynamicCache

    own = [v for k, v in vars(modeling).items()
           if isinstance(v, type) and k.endswith("Cache") and v.__module__ == modeling.__name__]
    return own or [DynamicCache]


# -- the sizes a decode cache holds ------------------------------------------------------------------------


def conv_state_bytes(conv_dim: int, conv_kernel: int, config: Any) -> int:
    """Bytes of one block's conv state: conv_dim x conv_kernel in the model's dtype (the cache keeps the conv's
    input as the forward computes it)."""
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    return conv_dim * conv_kernel * dtype.itemsize


def dtype_name(config: Any) -> str:
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
    return str(dtype).removeprefix("torch.")


# -- relations: what the conv state means --------------------------------------------------------------------


def _activation(module: Any):
    """The conv's activation: Mamba-2's and the DeltaNet's ``activation`` (silu); none on a mixer without one
    (LFM2's short convolution gates instead)."""
    from transformers.activations import ACT2FN

    name = getattr(module, "activation", None)
    return (lambda x: x) if name is None else ACT2FN[name]


def conv_module(module: Any) -> Any:
    """The mixer's depthwise ``nn.Conv1d``: ``conv1d`` (Mamba-2, the DeltaNet) or ``conv`` (LFM2's short conv)."""
    return module.conv1d if hasattr(module, "conv1d") else module.conv


def conv_relations(conv_input, what: str) -> tuple:
    """The conv state's relations over ``conv_input(host, inputs)``: the conv's input ``[batch, conv_dim, seq]``
    recomputed from the mixer's input by its own projections (``what`` says which, for the page)."""

    def _window(host, r):
        columns = conv_input(host, r["inputs"])
        previous = r["conv_state_input"]
        window = columns if previous is None else torch.cat([previous.to(columns), columns], dim=-1)
        kernel = conv_module(host._module).kernel_size[0]
        return [(F.pad(window, (max(0, kernel - window.shape[-1]), 0))[..., -kernel:], r["conv_state_output"])]

    window = relation(
        f"conv_state_output == the last conv_kernel columns of [conv_state_input (at a prompt's start: none), the "
        f"conv's input], zeros on the left where shorter; the conv's input = {what}",
        proves="conv_state_input conv_state_output", reads="inputs conv_state_input conv_state_output")(_window)

    def _next(host, r):
        module = host._module
        columns = conv_input(host, r["inputs"])
        previous = r["conv_state_input"]
        if previous is not None:
            columns = torch.cat([previous.to(columns), columns], dim=-1)
        new = columns[..., :1]  # a next column: the first of this call's
        step = kernels.reference(inspect.getmodule(type(module)).causal_conv1d_update)
        conv1d = conv_module(module)
        weight = conv1d.weight
        stepped = step(new, r["conv_state_output"].clone(), weight.squeeze(1), conv1d.bias,
                       getattr(module, "activation", None))
        whole = torch.cat([columns, new], dim=-1).to(weight.dtype)
        convolved = _activation(module)(conv1d(whole)[..., :whole.shape[-1]])
        return [(convolved[..., -1:], stepped)]

    following = relation(
        "a decode step from conv_state_output convolves as the whole sequence does: transformers' "
        "causal_conv1d_update(c, conv_state_output) == act(conv1d([the conv's input, c]))'s last column, c a next "
        "column (the conv input's first)", proves="conv_state_output",
        reads="inputs conv_state_input conv_state_output", tolerance=1e-5, exact=False)(_next)
    return window, following


def masked_input(inputs: tuple) -> torch.Tensor:
    """The mixer's input as its forward first makes it: padded positions zeroed."""
    args, kwargs = inputs
    x = args[0] if args else kwargs["hidden_states"]
    mask = kwargs.get("attention_mask")
    return x if mask is None else (x * mask[:, :, None]).to(x.dtype)
