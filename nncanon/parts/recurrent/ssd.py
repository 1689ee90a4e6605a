"""The Mamba-2 mixer (state-space duality): its scan's inputs, the recurrent state, and the token route.

A Mamba-2 forward calls one of two module-level kernels of its modeling module: the chunked scan
(``mamba2_chunk_scan``) on a prompt, the one-token update (``mamba2_selective_state_update``) on a
cached decode step, with different arguments. `tap` wraps both and serves one call shape at
``{mixer path}.kernel.input`` and ``.output`` whichever runs, so the values mean the same on a prompt
and on a decode step: ``(x, dt, A, B, C)`` with ``D``, ``dt_bias``, ``initial_state`` and ``dt_limit``
as keywords, and ``(y, final_state)``. Under ``nncanon.route_kernels(family, "torch")`` every call runs
`token_by_token`, the update's math one token at a time (transformers' ``torch_forward`` reference
for the recurrence), which serves the state after each token as DeltaNet's route does
(``{path}.state.output`` per token, ``{path}.states.output`` stacked).

**One recurrent state across DeltaNet and Mamba-2.** A DeltaNet's state ``[heads, key_dim,
value_dim]`` is written by a key and read by a query over ``key_dim``, giving ``value_dim`` numbers
per head. Mamba-2's is written by B (``dt · B xᵀ``) and read by C over ``state_size``, giving
``head_dim`` numbers: B plays the key, C the query, x the value. So its values take DeltaNet's names
and layouts with ``key_dim = state_size``, ``value_dim = head_dim``, ``key_heads = n_groups`` (B and C
are shared by the heads of a group, as a DeltaNet's keys by its value heads) and ``heads = num_heads``:
``attention_keys`` is B, ``attention_queries`` C, ``attention_values`` x, ``time_steps`` dt,
``decay_rates`` A (``-exp(A_log)`` per head, float32, as the scan receives it) and ``decays`` the per-token log
decay ``dt · A`` (the DeltaNet's gate factors the same way: ``g = -exp(A_log) · softplus(a + dt_bias)``). The
conv state before the scan is `conv`'s, shared with the DeltaNet. transformers keeps the state as ``[heads, head_dim, state_size]``; ``state``,
``states``, ``state_input`` and ``state_output`` serve it transposed (a view: edits land), as
``State [batch heads key_dim value_dim]``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from ...core import kernels
from ...core.hosts import host
from ...core.layouts import Gates, LinearQK, LinearV, MaybeState, Residual, State, States, layout
from ...core.locators import child, own
from ...core.precision import RECURRENCE, SUBBLOCK
from ...core.relations import called, relation
from ...core.values import Condition, Value, View
from . import conv
from .deltanet import TOKEN_ROUTE, TOKEN_STATE, TOKEN_STATES, PerHead, human_bytes, kernel_arg, kernel_out

KERNELS = ("mamba2_chunk_scan", "mamba2_selective_state_update")

SSD_KERNEL = Condition(
    needs='nncanon.route_kernels(model.family, "torch")',
    why=("the values are read at transformers' pure-torch scan, and with mamba_ssm installed transformers calls its "
         "fused kernels instead"),
    holds=lambda model: kernels.torch_kernels_run(model.family),
)

# -- the uniform call and the token-by-token scan ----------------------------------------------------------


def token_by_token(x, dt, A, B, C, D=None, dt_bias=None, initial_state=None, dt_limit=(0.0, float("inf")),
                   serve=None):
    """The Mamba-2 recurrence one token at a time, in float32: ``dt = clamp(softplus(dt + dt_bias))``,
    ``state = state · exp(dt · A) + dt · x Bᵀ``, ``y = state C + D · x`` (``mamba2_selective_state_update``'s
    math per token). ``serve`` is ``(interleaver, path)`` in a trace: each token's state is served at
    ``{path}.state.output`` before the token's output is read from it, the stack at ``{path}.states.output``."""
    batch, seq, heads, head_dim = x.shape
    dt = dt.float() + (dt_bias.float() if dt_bias is not None else 0.0)
    dt = torch.nn.functional.softplus(dt).clamp(dt_limit[0], dt_limit[1])
    rep = heads // B.shape[2]
    B, C = (t.float().repeat_interleave(rep, dim=2) for t in (B, C))
    state = (torch.zeros(batch, heads, head_dim, B.shape[-1], dtype=torch.float32, device=x.device)
             if initial_state is None else initial_state.float())
    interleaver, path = serve if serve is not None else (None, "")
    at_state, at_states = f"{path}.{kernels.STATE}.output", f"{path}.{kernels.STATES}.output"
    keep = interleaver is not None and (kernels._wanted(interleaver, at_states) or at_state in interleaver.parked)
    kept, outputs = [], []
    for t in range(seq):
        step = dt[:, t]
        state = state * _decay(step, A.float()) + \
            (step[..., None] * x[:, t].float())[..., None] * B[:, t, :, None, :]
        if interleaver is not None:
            state = interleaver.handle(at_state, state)
        if keep:
            kept.append(state)
        y = (state * C[:, t, :, None, :]).sum(-1)
        outputs.append(y + D.float()[:, None] * x[:, t].float() if D is not None else y)
    if interleaver is not None:
        states = torch.stack(kept, 1) if kernels._wanted(interleaver, at_states) and kept else None
        interleaver.handle(at_states, states)
    return torch.stack(outputs, 1).to(x.dtype), state


def _decay(step, A):
    """The factor a token decays the ``[.., heads, head_dim, state_size]`` state by: ``exp(dt · A)``, one per head
    (Mamba-2's A ``[heads]``) or one per head and state dimension (Mamba-1's A ``[channels, state_size]``, its
    heads being channels of head_dim 1: `nncanon.parts.recurrent.selective_scan`)."""
    if A.dim() == 1:
        return torch.exp(step * A)[..., None, None]
    return torch.exp(step[..., None] * A)[..., None, :]


def _tap_chunk(fn):
    @functools.wraps(fn)
    def chunk(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None, dt_softplus=False,
              dt_limit=(0.0, float("inf")), return_final_states=False, **rest):
        def original(args, kw):
            return fn(*args, chunk_size=chunk_size, D=kw["D"], z=z, dt_bias=kw["dt_bias"],
                      initial_states=kw["initial_state"], dt_softplus=dt_softplus, dt_limit=kw["dt_limit"],
                      return_final_states=True, **rest)

        kw = {"D": D, "dt_bias": dt_bias, "initial_state": initial_states, "dt_limit": dt_limit}
        y, final = _run((x, dt, A, B, C), kw, original)
        # the cache keeps a copy: the tensor served as state_output is not overwritten by later steps
        return (y, final.clone()) if return_final_states else y

    chunk.__nncanon_tap__ = fn
    return chunk


def _tap_update(fn):
    @functools.wraps(fn)
    def update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, **rest):
        head_dim, size = x.shape[-1], A.shape[-1]

        def original(args, kw):
            x1, dt1, A1, B1, C1 = args
            if kw["initial_state"] is not state:
                state.copy_(kw["initial_state"])
            y = fn(state, x1[:, 0], dt1[:, 0, :, None].expand(-1, -1, head_dim), A1[:, None, None].expand(-1, head_dim, size),
                   B1[:, 0], C1[:, 0], kw["D"][:, None].expand(-1, head_dim), z=None,
                   dt_bias=kw["dt_bias"][:, None].expand(-1, head_dim), dt_softplus=dt_softplus, **rest)
            return y[:, None], state.clone()  # served apart from the buffer the next step overwrites in place

        kw = {"D": D[:, 0], "dt_bias": dt_bias[:, 0], "initial_state": state.clone(), "dt_limit": (0.0, float("inf"))}
        y, final = _run((x[:, None], dt[:, None, :, 0], A[:, 0, 0], B[:, None], C[:, None]), kw, original)
        state.copy_(final)  # the served state, edited or not, is what the cache keeps for the next step
        # a gate handed to the kernel (Falcon-H1 without its gated norm) is applied after the served output, so
        # attention_head_outputs is the ungated y on a decode step as on a prompt
        return y[:, 0] if z is None else (y[:, 0] * torch.nn.functional.silu(z.float())).to(y.dtype)

    update.__nncanon_tap__ = fn
    return update


def _run(args, kw, original):
    """Serve the uniform call at the running mixer's kernel point and run it (the route's scan or transformers')."""
    if not kernels._running:
        return original(args, kw)
    envoy, family = kernels._innermost()
    token_route = kernels.route(family) == "torch"
    interleaver, path = envoy.interleaver, envoy.path
    if not interleaver.interleaving:
        return _torch_route(args, kw, original, None) if token_route else original(args, kw)
    args, kw = interleaver.handle(f"{path}.{kernels.KERNEL}.input", (args, kw))
    out = _torch_route(args, kw, original, (interleaver, path)) if token_route else original(args, kw)
    return interleaver.handle(f"{path}.{kernels.KERNEL}.output", tuple(out))


def _torch_route(args, kw, original, serve):
    y, final = token_by_token(*args, D=kw["D"], dt_bias=kw["dt_bias"], initial_state=kw["initial_state"],
                              dt_limit=kw["dt_limit"], serve=serve)
    return y, final


def tap(modeling) -> None:
    for name, wrap in zip(KERNELS, (_tap_chunk, _tap_update)):
        fn = getattr(modeling, name)
        if not hasattr(fn, "__nncanon_tap__"):
            setattr(modeling, name, wrap(fn))
    kernels.tapped(modeling, KERNELS)


def prepare(model: Any, modeling: Any) -> None:
    tap(modeling)
    for envoy in model._hosts:
        if isinstance(envoy, SSD):
            kernels.track(envoy)
    conv.prepare(model, modeling, SSD)


def reference_scan(modeling):
    """transformers' own chunked scan (the default path), under every wrapper."""
    return inspect.unwrap(modeling.mamba2_chunk_scan)


# -- values ------------------------------------------------------------------------------------------------


def _flip(x):
    return None if x is None else x.transpose(-1, -2)


#: transformers' [.., head_dim, state_size] as the shared State layout [.., key_dim, value_dim]
AS_STATE = View("transposed to [key_dim value_dim]", lambda host, x: _flip(x), lambda host, new, current: _flip(new))


def _steps(host, dt):
    module = host._module
    return torch.nn.functional.softplus(dt.float() + module.dt_bias.float()).clamp(*module.time_step_limit)


TIME_STEPS = View("softplus(dt + dt_bias), clamped", _steps, None)
DECAYS = View("time_steps · A", lambda host, dt: _steps(host, dt) * -torch.exp(host._module.A_log.float()), None)

Neurons = layout("Neurons", "batch seq intermediate_size")
_K = (SSD_KERNEL,)


def state_bytes_per_token(model: Any) -> int:
    """Bytes ``states`` holds per token per block: one float32 [heads, key_dim, value_dim] state, its sizes as
    the family's dim_sizes name them (mamba2's num_heads/state_size/head_dim, Falcon-H1's mamba_* fields)."""
    sizes = model.dim_sizes()
    return sizes["heads"] * sizes["key_dim"] * sizes["value_dim"] * 4


def conv_state_bytes(model: Any) -> int:
    """Bytes of one block's conv state in a decode cache: conv_dim x conv_kernel in the model's dtype."""
    sizes = model.dim_sizes()
    return conv.conv_state_bytes(sizes["conv_dim"], sizes["conv_kernel"], model.text_config)


def states_note(model: Any) -> str:
    return (f"materialized only when read: {human_bytes(state_bytes_per_token(model))} per token per block "
            f"(float32, heads x key_dim x value_dim: the mixer's heads x state size x head size); a decode cache "
            f"holds one such state per block, plus the conv state, {human_bytes(conv_state_bytes(model))} per block")


def conv_state_note(model: Any) -> str:
    sizes = model.dim_sizes()
    return (f"{human_bytes(conv_state_bytes(model))} per block in a decode cache ({sizes['conv_dim']} channels: x, "
            f"B, C; x {sizes['conv_kernel']} positions, {conv.dtype_name(model.text_config)})")


SSD = host("SSD", values=[
    Value("attention_output", Residual, "What the mixer adds to the residual stream", own("output")),
    *conv.conv_values("x, B, C", note=conv_state_note),
    Value("attention_values", LinearV, "x: what each token writes into the state, per head (after the convolution)",
          kernel_arg(0), conditions=_K),
    Value("attention_keys", LinearQK, "B: the direction each token writes along, per group of heads",
          kernel_arg(3), conditions=_K),
    Value("attention_queries", LinearQK, "C: the direction each token reads the state along, per group of heads",
          kernel_arg(4), conditions=_K),
    Value("time_steps", Gates, "dt: softplus(dt + dt_bias), clamped; scales each token's write and its decay; "
          "read-only", kernel_arg(1), view=TIME_STEPS, conditions=_K),
    Value("decay_rates", PerHead, "A: each head's decay rate, -exp(A_log) in float32 (negative), the log decay "
          "per unit of time step", kernel_arg(2), conditions=_K),
    Value("decays", Gates, "The per-token log decay of the recurrent state: time_steps · decay_rates (dt · A); "
          "read-only", kernel_arg(1), view=DECAYS, conditions=_K),
    Value("state_input", MaybeState,
          "The recurrent state entering the layer, or None at the start of a prompt (a copy of the cache's buffer)",
          kernel_arg("initial_state"), view=AS_STATE, conditions=_K),
    Value("attention_head_outputs", LinearV, "The per-head outputs y = state C + D·x, before the gated norm",
          kernel_out(0), conditions=_K),
    Value("state_output", State, "The recurrent state leaving the layer", kernel_out(1), view=AS_STATE,
          conditions=_K, reaches="the next call"),
    Value("state", State, "The recurrent state after one token of the prompt; iterate it with tracer.iter; "
          "needs route_kernels(family, 'torch')", TOKEN_STATE, view=AS_STATE, conditions=(TOKEN_ROUTE,)),
    Value("states", States, "The recurrent state after every token of this call; needs route_kernels(family, "
          "'torch')", TOKEN_STATES, view=View("read-only", lambda host, x: _flip(x), None),
          conditions=(TOKEN_ROUTE,), note=states_note),
    Value("gated_norm_output", Neurons, "The gated RMSNorm's output: rms(y · silu(z)) · weight, what out_proj reads",
          child("norm")),
], HOST="model.layers[i].mixer", KIND="Mamba-2 mixer")

# -- relations: what the mixer's values mean ----------------------------------------------------------------


def recurrence(x, dt, A, B, C, D, dt_bias, initial_state, dt_limit):
    """The Mamba-2 recurrence in float64, written out: every token's output and state ``[b, s, h, p, n]``."""
    x, dt, B, C = (t.detach().double() for t in (x, dt, B, C))
    dt = torch.nn.functional.softplus(dt + dt_bias.double()).clamp(*dt_limit)
    rep = x.shape[2] // B.shape[2]
    B, C = B.repeat_interleave(rep, 2), C.repeat_interleave(rep, 2)
    state = (torch.zeros(*x.shape[:1], *x.shape[2:], B.shape[-1], dtype=torch.float64) if initial_state is None
             else initial_state.double())
    outputs, states = [], []
    for t in range(x.shape[1]):
        state = state * _decay(dt[:, t], A.double()) + \
            (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None, :]
        outputs.append((state * C[:, t, :, None, :]).sum(-1) + D.double()[:, None] * x[:, t])
        states.append(state)
    return torch.stack(outputs, 1), torch.stack(states, 1)


def _projected(host, inputs):
    """(z, the conv's input [batch, conv_dim, seq], dt) by the mixer's own in_proj on its masked input."""
    module = host._module
    x = conv.masked_input(inputs)
    # Falcon-H1 scales the mixer's input by ssm_in_multiplier and the projection by its muP vector (absent: 1)
    projected = module.in_proj(x * getattr(module, "ssm_in_multiplier", 1.0)) * getattr(module, "mup_vector", 1.0)
    gate, xbc, dt = projected.split([module.intermediate_size, module.conv_dim, module.num_heads], dim=-1)
    return gate, xbc.transpose(1, 2), dt


@relation("attention_values, attention_keys, attention_queries, dt == split(act(conv1d(in_proj(input)))) on the real "
          "tokens; time_steps == clamp(softplus(dt + dt_bias)); decay_rates == -exp(A_log) in float32; decays == "
          "time_steps · decay_rates",
          proves="attention_values attention_keys attention_queries time_steps decay_rates decays",
          reads="inputs attention_values attention_keys attention_queries time_steps decay_rates decays", tolerance=SUBBLOCK)
def _inputs(host, r):
    module = host._module
    xs, B, C, dt, _ = _scan_terms(host, r["inputs"])
    steps = torch.nn.functional.softplus(dt.float() + module.dt_bias.float()).clamp(*module.time_step_limit)
    rates = -torch.exp(module.A_log.float())
    return [(xs, r["attention_values"]), (B, r["attention_keys"]), (C, r["attention_queries"]),
            (steps, r["time_steps"]), (rates, r["decay_rates"]), (steps * r["decay_rates"], r["decays"])]


def _scan_terms(host, inputs):
    """(x [b, s, heads, head_dim], B, C [b, s, groups, state_size], dt before its bias, z) by the mixer's own in_proj
    and conv1d on its masked input, x, B and C zero on the padding."""
    module, mask = host._module, inputs[1].get("attention_mask")
    gate, xbc, dt = _projected(host, inputs)
    xbc = module.act(module.conv1d(xbc)[..., :xbc.shape[-1]]).transpose(1, 2)
    if mask is not None:
        xbc = xbc * mask[:, :, None].to(xbc.dtype)
    size = module.n_groups * module.ssm_state_size
    xs, B, C = xbc.split([module.intermediate_size, size, size], dim=-1)
    return (xs.unflatten(-1, (module.num_heads, module.head_dim)), B.unflatten(-1, (module.n_groups, -1)),
            C.unflatten(-1, (module.n_groups, -1)), dt, gate)


_WHOLE = ("y = the recurrence from zeros (state = state · exp(dt · A) + dt · x Bᵀ, y = state · C + D · x) over x, B, "
          "C = split(act(conv1d(in_proj(input)'s x, B, C))) on the real tokens, dt = clamp(softplus(in_proj(input)'s "
          "dt + dt_bias)), A = -exp(A_log), z = in_proj(input)'s gate, on a call that starts a prompt (no conv state "
          "handed in), every value outside the kernel: what holds whichever kernel runs (transformers' or "
          "mamba_ssm's fused one)")


def mixer_relation(gated_norm: bool):
    """The whole mixer from values outside the kernel on a call that starts a prompt; ``gated_norm``: through the
    gated RMSNorm the host serves as gated_norm_output, else (Falcon-H1) y · silu(z), or the norm where the config
    has one (mamba_rms_norm), straight into out_proj."""
    if gated_norm:
        text = f"gated_norm_output == rms(y · silu(z)) · norm.weight, {_WHOLE}; attention_output == out_proj(gated_norm_output)"
        terms = "gated_norm_output attention_output"
    else:
        text = (f"attention_output == out_proj(y · silu(z)) (mamba_rms_norm: out_proj(rms(y · silu(z)) · norm.weight)), "
                f"{_WHOLE}; in_proj's input is input · ssm_in_multiplier, its output times the muP vector")
        terms = "attention_output"

    @relation(text, proves=terms, reads=f"inputs conv_state_input {terms}", tolerance=RECURRENCE)
    def _mixer(host, r):
        if r["conv_state_input"] is not None:  # a state handed in: its recurrent part is the kernel's (state_input)
            return []
        module = host._module
        xs, B, C, dt, z = _scan_terms(host, r["inputs"])
        y, _ = recurrence(xs, dt, -torch.exp(module.A_log.float()), B, C, module.D, module.dt_bias, None,
                          module.time_step_limit)
        y = y.flatten(2).to(z.dtype)
        gated = module.norm(y, z) if gated_norm or getattr(module, "mamba_rms_norm", False) else \
            y * torch.nn.functional.silu(z)
        pairs = [(gated, r["gated_norm_output"])] if gated_norm else []
        return [*pairs, (module.out_proj(gated), r["attention_output"])]

    return _mixer


MIXER = mixer_relation(True)

_SCAN = "attention_values attention_keys attention_queries time_steps decay_rates decays state_input"


@relation("(attention_head_outputs, state_output) == the recurrence from state_input, token by token: state = state · "
          "exp(decays) + time_steps · attention_values attention_keysᵀ, attention_head_outputs = state · "
          "attention_queries + D · attention_values",
          proves="state_input attention_head_outputs state_output",
          reads=f"{_SCAN} attention_head_outputs state_output", tolerance=SUBBLOCK)
def _scan(host, r):
    module = host._module
    outputs, states = recurrence(r["attention_values"], _raw_dt(module, r["time_steps"]), r["decay_rates"],
                                 r["attention_keys"], r["attention_queries"], module.D, torch.zeros_like(module.dt_bias),
                                 _flip(r["state_input"]), (0.0, float("inf")))
    return [(outputs, r["attention_head_outputs"]), (_flip(states[:, -1]), r["state_output"])]


def _raw_dt(module, steps):
    """time_steps as the recurrence's pre-softplus input: the inverse softplus, so softplus(·) is time_steps again."""
    steps = steps.double()
    return steps + torch.log(-torch.expm1(-steps))


@relation("attention_output == out_proj(gated_norm_output); gated_norm_output == rms(attention_head_outputs · "
          "silu(z)) · norm.weight, z = in_proj(input)'s first intermediate_size columns",
          proves="attention_head_outputs gated_norm_output attention_output",
          reads="attention_head_outputs norm.inputs gated_norm_output attention_output", tolerance=SUBBLOCK, exact=False)
def _out(host, r):
    module, heads = host._module, r["attention_head_outputs"]
    gate = r["norm.inputs"][0][1]
    normed = module.norm(heads.reshape(*heads.shape[:2], -1), gate)
    return [(normed, r["gated_norm_output"]), (called(module.out_proj, normed), r["attention_output"])]


@relation("states[:, -1] == state_output; state (its first visit) == states[:, 0]; states[:, t] == the state of the "
          "prompt cut after token t, by transformers' chunked scan; the route's attention_head_outputs == the chunked "
          "scan's", proves="states state",
          reads=f"{_SCAN} state states attention_head_outputs state_output", tolerance=SUBBLOCK)
def _states(host, r):
    module = host._module
    scan = reference_scan(inspect.getmodule(type(module)))
    x, B, C = r["attention_values"], r["attention_keys"], r["attention_queries"]
    dt = _raw_dt(module, r["time_steps"]).float()
    A, initial = r["decay_rates"], _flip(r["state_input"])
    pairs = [(r["states"][:, -1], r["state_output"]), (r["state"], r["states"][:, 0])]
    full, _ = scan(x, dt, A, B, C, chunk_size=module.chunk_size, D=module.D, initial_states=initial, dt_softplus=True,
                   return_final_states=True)
    pairs.append((full, r["attention_head_outputs"]))
    for t in range(x.shape[1]):
        _, cut = scan(x[:, :t + 1], dt[:, :t + 1], A, B[:, :t + 1], C[:, :t + 1], chunk_size=module.chunk_size,
                      D=module.D, initial_states=initial, dt_softplus=True, return_final_states=True)
        pairs.append((_flip(cut), r["states"][:, t]))
    return pairs


def conv_input(host, inputs):
    return _projected(host, inputs)[1]


CONV_RELATIONS = conv.conv_relations(conv_input, "in_proj(input)'s x, B, C columns")
SSD.RELATIONS = (_inputs, _scan, _out, _states, MIXER, *CONV_RELATIONS)
