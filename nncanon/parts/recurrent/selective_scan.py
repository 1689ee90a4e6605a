"""Mamba-1's selective scan (transformers' MambaMixer, FalconMambaMixer, JambaMambaMixer) in the recurrent-state
vocabulary.

**Mamba-1 is Mamba-2 with one channel per head.** Each of the ``intermediate_size`` channels keeps its own
state of ``state_size`` numbers, written by B (``dt · x · B``) and read by C, with B and C shared by every
channel. So the values take Mamba-2's (and DeltaNet's) names and layouts with ``heads = intermediate_size``
(a channel is a head), ``key_dim = state_size`` (B and C, ``attention_keys`` and ``attention_queries``, live
there), ``value_dim = 1`` (a channel's x and its output are one number) and ``key_heads = 1`` (B and C are
one group for all channels). transformers' state ``[batch, intermediate_size, state_size]`` is served as
``State [batch heads key_dim value_dim]`` = ``[batch, intermediate_size, state_size, 1]``: a view, so edits land
in the cache. What differs from Mamba-2: A is per channel **and** per state dimension (``A_log`` is
``[intermediate_size, state_size]``), so ``decay_rates`` is ``DecayRates [heads key_dim]`` and ``decays``, the
per-token log decay ``dt · A``, ``KeyGates [batch seq heads key_dim]``; there is no gated norm: the output is
``y · silu(z)`` straight into ``out_proj``.

A forward calls one of two module-level kernels (``mamba_selective_scan`` on a prompt, which always starts from
zeros, and ``mamba_selective_state_update`` on a cached decode step). `tap` wraps both and serves Mamba-2's one
call shape at ``{mixer path}.kernel.input`` / ``.output`` (`nncanon.parts.recurrent.ssd`): ``(x, dt, A, B, C)`` with ``D``,
``dt_bias``, ``initial_state`` and ``dt_limit`` as keywords, and ``(y, final_state)``, y before the gate (which
the tap applies after the served output, as the kernel would). Under ``nncanon.route_kernels(family, "torch")``
every call runs ssd's token-by-token recurrence, which serves ``state`` and ``states``. The conv window is
`conv`'s, over the x channels.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch
import torch.nn.functional as F

from ...core import kernels
from ...core.hosts import host
from ...core.layouts import Gates, LinearQK, LinearV, MaybeState, Residual, State, States, layout
from ...core.locators import Tap, child, own
from ...core.precision import RECURRENCE, SUBBLOCK
from ...core.relations import relation
from ...core.values import Condition, Value, View
from . import conv, ssd
from .deltanet import TOKEN_STATE, TOKEN_STATES, human_bytes

KERNELS = ("mamba_selective_scan", "mamba_selective_state_update")

#: A per channel and state dimension (Mamba-2's is one number per head)
DecayRates = layout("DecayRates", "heads key_dim")
#: the per-token log decay dt · A, per channel and state dimension
KeyGates = layout("KeyGates", "batch seq heads key_dim")
#: one number per token and channel (the gated output; a channel is a head)
Channels = layout("Channels", "batch seq heads")

# -- the tap: Mamba-1's two kernels served in Mamba-2's call shape ---------------------------------------------


def _tap_scan(fn):
    @functools.wraps(fn)
    def scan(hidden_states, dt, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,
             return_last_state=False, **rest):
        def original(args, kw):
            x1, dt1, A1, B1, C1 = args
            if kw["initial_state"] is not None:  # an edited start: transformers' scan starts from zeros only
                return ssd.token_by_token(*args, D=kw["D"], dt_bias=kw["dt_bias"],
                                          initial_state=kw["initial_state"], dt_limit=kw["dt_limit"])
            y, last = fn(x1[..., 0].transpose(1, 2), dt1.transpose(1, 2), A1, B1[:, :, 0].transpose(1, 2),
                         C1[:, :, 0].transpose(1, 2), D=kw["D"], z=None, delta_bias=kw["dt_bias"],
                         delta_softplus=delta_softplus, return_last_state=True, **rest)
            return y.transpose(1, 2)[..., None], last[:, :, None].clone()

        # the uniform call: x [b, s, channels, 1], dt [b, s, channels], B and C [b, s, 1, state_size]
        args = (hidden_states.transpose(1, 2)[..., None], dt.transpose(1, 2), A, B.transpose(1, 2)[:, :, None],
                C.transpose(1, 2)[:, :, None])
        kw = {"D": D, "dt_bias": delta_bias, "initial_state": None, "dt_limit": (0.0, float("inf"))}
        y, final = ssd._run(args, kw, original)
        y = y[..., 0].transpose(1, 2)
        if z is not None:  # the gate, after the served output: attention_head_outputs is the ungated y
            y = y * F.silu(z)
        return (y, final[:, :, 0]) if return_last_state else y

    scan.__nncanon_tap__ = fn
    return scan


def _tap_update(fn):
    @functools.wraps(fn)
    def update(state, hidden_states, dt, A, B, C, D=None, dt_bias=None, dt_softplus=False, z=None, **rest):
        def original(args, kw):
            x1, dt1, A1, B1, C1 = args
            state.copy_(kw["initial_state"][:, :, 0])
            y = fn(state, x1[:, 0, :, 0], dt1[:, 0], A1, B1[:, 0, 0], C1[:, 0, 0], kw["D"], dt_bias=kw["dt_bias"],
                   dt_softplus=dt_softplus, z=None, **rest)
            return y[:, None, :, None], state.clone()[:, :, None]  # apart from the buffer the next step overwrites

        args = (hidden_states[:, None, :, None], dt[:, None], A, B[:, None, None], C[:, None, None])
        kw = {"D": D, "dt_bias": dt_bias, "initial_state": state.clone()[:, :, None], "dt_limit": (0.0, float("inf"))}
        y, final = ssd._run(args, kw, original)
        state.copy_(final[:, :, 0])  # the served state, edited or not, is what the cache keeps for the next step
        y = y[:, 0, :, 0]
        return (y if z is None else y * F.silu(z)).to(hidden_states.dtype)

    update.__nncanon_tap__ = fn
    return update


def tap(modeling) -> None:
    for name, wrap in zip(KERNELS, (_tap_scan, _tap_update)):
        fn = getattr(modeling, name)
        if not hasattr(fn, "__nncanon_tap__"):
            setattr(modeling, name, wrap(fn))
    kernels.tapped(modeling, KERNELS)


def prepare(model: Any, modeling: Any, host_class: type) -> None:
    tap(modeling)
    for envoy in model._hosts:
        if isinstance(envoy, host_class):
            kernels.track(envoy)
    conv.prepare(model, modeling, host_class)


def reference_scan(modeling):
    """transformers' own scan (the default path of a prompt), under every wrapper."""
    return inspect.unwrap(modeling.mamba_selective_scan)


def reference_update(modeling):
    """transformers' own one-token update (a cached decode step), under every wrapper."""
    return inspect.unwrap(modeling.mamba_selective_state_update)


# -- values ----------------------------------------------------------------------------------------------

_KERNEL = "the kernel this call runs (a prompt's scan or a decode step's one-token update)"


def kernel_arg(element) -> Tap:
    return Tap(io="input", element=element, name=kernels.KERNEL, described=_KERNEL)


def kernel_out(element) -> Tap:
    return Tap(io="output", element=element, name=kernels.KERNEL, described=_KERNEL)



def _steps(host, dt):
    return F.softplus(dt.float() + host._module.dt_proj.bias.float())


TIME_STEPS = View("softplus(dt + dt_proj.bias)", _steps, None)
DECAYS = View("time_steps · A, per state dimension",
              lambda host, dt: _steps(host, dt)[..., None] * -torch.exp(host._module.A_log.float()), None)


#: Mamba-2's counts hold as they are: a channel is a head whose value_dim is 1 (dim_sizes says so)
state_bytes_per_token = ssd.state_bytes_per_token
conv_state_bytes = ssd.conv_state_bytes


def states_note(model: Any) -> str:
    return (f"materialized only when read: {human_bytes(state_bytes_per_token(model))} per token per block "
            f"(float32, heads x key_dim x value_dim: the mixer's channels x state size x 1); a decode cache holds "
            f"one such state per block, plus the conv state, {human_bytes(conv_state_bytes(model))} per block")


def conv_state_note(model: Any) -> str:
    sizes = model.dim_sizes()
    return (f"{human_bytes(conv_state_bytes(model))} per block in a decode cache ({sizes['conv_dim']} channels: x; "
            f"x {sizes['conv_kernel']} positions, {conv.dtype_name(model.text_config)})")


_K = (ssd.SSD_KERNEL,)
#: state and states: transformers' prompt scan keeps each token's state only inside its loop (and the fused kernel
#: not at all); the route runs every call through ssd's token-by-token recurrence, which serves them
TOKEN_ROUTE = Condition(
    needs='nncanon.route_kernels(model.family, "torch")',
    why=("transformers' scan keeps each token's state only inside its own loop; the route runs every call through "
         "the token-by-token recurrence, which serves it"),
    holds=lambda model: kernels.route(model.family) == "torch",
)

SelectiveScan = host("SelectiveScan", values=[
    Value("attention_output", Residual, "What the mixer adds to the residual stream", own("output")),
    *conv.conv_values("x", note=conv_state_note),
    Value("attention_values", LinearV, "x: what each token writes into each channel's state (after the "
          "convolution), one number per channel (value_dim 1)", kernel_arg(0), conditions=_K),
    Value("attention_keys", LinearQK, "B: the direction each token writes along, one for every channel "
          "(key_heads 1)", kernel_arg(3), conditions=_K),
    Value("attention_queries", LinearQK, "C: the direction each token reads the state along, one for every "
          "channel (key_heads 1)", kernel_arg(4), conditions=_K),
    Value("time_steps", Gates, "dt: softplus(dt + dt_proj.bias) per token and channel; scales each token's write "
          "and its decay; read-only", kernel_arg(1), view=TIME_STEPS, conditions=_K),
    Value("decay_rates", DecayRates, "A: each channel's decay rate per state dimension, -exp(A_log) in float32 "
          "(negative), the log decay per unit of time step", kernel_arg(2), conditions=_K),
    Value("decays", KeyGates, "The per-token log decay of the recurrent state, per channel and state dimension: "
          "time_steps · decay_rates (dt · A); read-only", kernel_arg(1), view=DECAYS, conditions=_K),
    Value("state_input", MaybeState,
          "The recurrent state entering the layer, or None on a prompt (transformers' scan starts a prompt from "
          "zeros; a decode step's is a copy of the cache's buffer)", kernel_arg("initial_state"), view=ssd.AS_STATE,
          conditions=_K),
    Value("attention_head_outputs", LinearV, "The per-channel outputs y = state C + D·x, before the gate silu(z)",
          kernel_out(0), conditions=_K),
    Value("state_output", State, "The recurrent state leaving the layer", kernel_out(1), view=ssd.AS_STATE,
          conditions=_K, reaches="the next call"),
    Value("gated_output", Channels, "The gated output y · silu(z), what out_proj reads (Mamba-2 norms it here: "
          "gated_norm_output)", child("out_proj", "input")),
    Value("state", State, "The recurrent state after one token of the prompt; iterate it with tracer.iter; "
          "needs route_kernels(family, 'torch')", TOKEN_STATE, view=ssd.AS_STATE, conditions=(TOKEN_ROUTE,)),
    Value("states", States, "The recurrent state after every token of this call; needs route_kernels(family, "
          "'torch')", TOKEN_STATES, view=View("read-only", lambda host, x: ssd._flip(x), None),
          conditions=(TOKEN_ROUTE,), note=states_note),
], HOST="model.layers[i].mixer", KIND="Mamba-1 mixer")

# -- relations: what the mixer's values mean ----------------------------------------------------------------


def _projected(host, inputs):
    """(x before the conv [b, channels, s], z [b, s, channels]) by the mixer's own in_proj on its masked input."""
    xs, z = host._module.in_proj(conv.masked_input(inputs)).chunk(2, dim=-1)
    return xs.transpose(1, 2), z


def conv_input(host, inputs):
    return _projected(host, inputs)[0]


def rms(x, eps):
    """A weightless RMSNorm over the last dimension, in float32 (Falcon-Mamba's B, C and dt norms)."""
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _normed(module, name, x, gain: bool):
    """``x`` through the mixer's RMSNorm ``name`` written out: rms(x), times its weight when ``gain`` (Jamba's;
    Falcon-Mamba's weight buffers are dummies the forward never reads), with the eps the module keeps."""
    norm = getattr(module, name)
    eps = getattr(module, "rms_eps", None) or getattr(norm, "variance_epsilon", None) or norm.eps
    return norm.weight * rms(x, eps) if gain else rms(x, eps)


def _scan_terms(host, inputs, normed: bool, gain: bool):
    """(x after the conv [b, s, channels], dt before its bias, B, C [b, s, state_size]) by the mixer's own
    in_proj, conv1d, x_proj, norms (``normed``, ``gain``: `inputs_relation`'s) and dt_proj on its masked input."""
    module, mask = host._module, inputs[1].get("attention_mask")
    xs, _ = _projected(host, inputs)
    xs = module.act(module.conv1d(xs)[..., :xs.shape[-1]]).transpose(1, 2)
    if mask is not None:
        xs = xs * mask[:, :, None].to(xs.dtype)
    dt, B, C = module.x_proj(xs).split([module.time_step_rank, module.ssm_state_size, module.ssm_state_size], -1)
    if normed:
        dt, B, C = (_normed(module, name, t, gain) for name, t in (("dt_layernorm", dt), ("b_layernorm", B),
                                                             ("c_layernorm", C)))
    # dt_proj's product as transformers forms it (weight @ dt_inᵀ), not dt_in @ weightᵀ: the two reduce in
    # an order each CPU's kernels pick by shape, and "0" on the page must hold on every CPU
    return xs, (module.dt_proj.weight @ dt.transpose(1, 2)).transpose(1, 2), B, C


def inputs_relation(normed: bool, gain: bool = False):
    """The relation tying the scan's inputs to the mixer's own projections; ``normed``: RMSNorms on dt, B and C after
    x_proj (Falcon-Mamba's with no weight, eps mixer_rms_eps; with ``gain``, Jamba's, a learned weight, eps
    rms_norm_eps)."""
    wrap = (lambda name: f"norm({name})") if normed else (lambda name: name)
    text = (f"attention_values == act(conv1d(in_proj(input)'s x)) on the real tokens; (dt_in, B, C) = x_proj("
            f"attention_values); attention_keys == {wrap('B')}, attention_queries == {wrap('C')}; time_steps == "
            f"softplus(dt_proj.weight · {wrap('dt_in')} + dt_proj.bias); decay_rates == -exp(A_log) in float32; decays "
            f"== time_steps · decay_rates")
    if normed:
        text += (f"; norm(v) = {'weight · ' if gain else ''}v / sqrt(mean(v²) + eps), by dt_layernorm, b_layernorm, "
                 f"c_layernorm ({'each with its own weight' if gain else 'no weight'})")

    @relation(text, proves="attention_values attention_keys attention_queries time_steps decay_rates decays",
              reads="inputs attention_values attention_keys attention_queries time_steps decay_rates decays",
              tolerance=SUBBLOCK)
    def _inputs(host, r):
        xs, raw, B, C = _scan_terms(host, r["inputs"], normed, gain)
        steps = F.softplus(raw.float() + host._module.dt_proj.bias.float())
        rates = -torch.exp(host._module.A_log.float())
        return [(xs[..., None], r["attention_values"]), (B[:, :, None], r["attention_keys"]),
                (C[:, :, None], r["attention_queries"]), (steps, r["time_steps"]), (rates, r["decay_rates"]),
                (steps[..., None] * r["decay_rates"], r["decays"])]

    return _inputs


def mixer_relation(normed: bool, gain: bool = False):
    """The whole mixer from values outside the kernel, on a call that starts a prompt: what holds whichever kernel
    runs, transformers' scan or mamba_ssm's fused one (whose load serves no kernel value); ``normed``, ``gain``:
    `inputs_relation`'s."""
    dt_in = "norm(dt_in)" if normed else "dt_in"
    text = (f"gated_output == silu(z) · the recurrence from zeros (state = state · exp(dt · A) + dt · x · B, y = "
            f"state · C + D · x) over x = act(conv1d(in_proj(input)'s x)) on the real tokens, (dt_in, B, C) = "
            f"x_proj(x){' each normed' if normed else ''}, dt = softplus(dt_proj.weight · {dt_in} + dt_proj.bias), A "
            f"= -exp(A_log), z = in_proj(input)'s gate, on a call that starts a prompt (no conv state handed in), "
            f"every value outside the kernel: what holds whichever kernel runs (transformers' scan or mamba_ssm's "
            f"fused one); attention_output == out_proj(gated_output)")

    @relation(text, proves="gated_output attention_output", reads="inputs conv_state_input gated_output attention_output",
              tolerance=RECURRENCE)
    def _mixer(host, r):
        if r["conv_state_input"] is not None:  # a state handed in: its recurrent part is the kernel's (state_input)
            return []
        module = host._module
        xs, raw, B, C = _scan_terms(host, r["inputs"], normed, gain)
        A = -torch.exp(module.A_log.float())
        outputs, _ = ssd.recurrence(xs[..., None], raw, A, B[:, :, None], C[:, :, None], module.D,
                                    module.dt_proj.bias, None, (0.0, float("inf")))
        _, z = _projected(host, r["inputs"])
        gated = (outputs[..., 0] * F.silu(z.double())).to(r["gated_output"].dtype)
        return [(gated, r["gated_output"]), (module.out_proj(gated), r["attention_output"])]

    return _mixer


_SCAN = "attention_values attention_keys attention_queries time_steps decay_rates decays state_input"


def _recurrence(host, r, extra=None):
    """The float64 recurrence from state_input over this call's tokens (and ``extra``, one more token's
    (x, raw dt, B, C)): every token's output and state, in transformers' [.., channels, 1, state_size]."""
    module = host._module
    x, dt, B, C = r["attention_values"], ssd._raw_dt(module, r["time_steps"]), r["attention_keys"], \
        r["attention_queries"]
    if extra is not None:
        x, dt, B, C = (torch.cat([a.double(), b.double()], 1) for a, b in zip((x, dt, B, C), extra))
    return ssd.recurrence(x, dt, r["decay_rates"], B, C, module.D, torch.zeros_like(module.D),
                          ssd._flip(r["state_input"]), (0.0, float("inf")))


@relation("(attention_head_outputs, state_output) == the recurrence from state_input, token by token, per channel: "
          "state = state · exp(decays) + time_steps · attention_values · attention_keys, attention_head_outputs = "
          "state · attention_queries + D · attention_values",
          proves="state_input attention_head_outputs state_output",
          reads=f"{_SCAN} attention_head_outputs state_output", tolerance=SUBBLOCK)
def _scan(host, r):
    outputs, states = _recurrence(host, r)
    return [(outputs, r["attention_head_outputs"]), (ssd._flip(states[:, -1]), r["state_output"])]


@relation("gated_output == attention_head_outputs · silu(z), z = in_proj(input)'s last intermediate_size columns "
          "(the gate); attention_output == out_proj(gated_output)",
          proves="attention_head_outputs gated_output attention_output",
          reads="inputs attention_head_outputs gated_output attention_output", tolerance=SUBBLOCK)
def _out(host, r):
    module = host._module
    _, z = _projected(host, r["inputs"])
    gated = r["attention_head_outputs"][..., 0] * F.silu(z)
    return [(gated, r["gated_output"]), (module.out_proj(r["gated_output"]), r["attention_output"])]


@relation("states[:, -1] == state_output; state (its first visit) == states[:, 0]; states[:, t] == the state "
          "transformers' own scan leaves in the cache for the prompt cut after token t; the route's "
          "attention_head_outputs == that scan's", proves="states state",
          reads=f"{_SCAN} state states attention_head_outputs state_output", tolerance=SUBBLOCK)
def _states(host, r):
    module = host._module
    scan = reference_scan(inspect.getmodule(type(module)))
    x, B, C = r["attention_values"][..., 0].transpose(1, 2), r["attention_keys"][:, :, 0].transpose(1, 2), \
        r["attention_queries"][:, :, 0].transpose(1, 2)
    dt = ssd._raw_dt(module, r["time_steps"]).float().transpose(1, 2)
    A, bias = r["decay_rates"], torch.zeros_like(module.dt_proj.bias.float())
    pairs = [(r["states"][:, -1], r["state_output"]), (r["state"], r["states"][:, 0])]
    if r["state_input"] is not None:  # a decode step's single token: the cut is the call itself
        return pairs
    full, _ = scan(x, dt, A, B, C, D=module.D.float(), delta_bias=bias, delta_softplus=True, return_last_state=True)
    pairs.append((full.transpose(1, 2)[..., None], r["attention_head_outputs"]))
    for t in range(x.shape[-1]):
        _, cut = scan(x[..., :t + 1], dt[..., :t + 1], A, B[..., :t + 1], C[..., :t + 1], D=module.D.float(),
                      delta_bias=bias, delta_softplus=True, return_last_state=True)
        pairs.append((cut[..., None], r["states"][:, t]))
    return pairs


@relation("a decode step from state_output gives what the whole sequence does: transformers' "
          "mamba_selective_state_update(state_output, a next token) == the recurrence over [this call, that "
          "token]'s last output and state, the next token being this call's first (x, dt, B, C)",
          proves="state_output", reads=f"{_SCAN} state_output", tolerance=SUBBLOCK)
def _decode(host, r):
    module = host._module
    update = reference_update(inspect.getmodule(type(module)))
    raw = ssd._raw_dt(module, r["time_steps"]).float()
    x, B, C = r["attention_values"], r["attention_keys"], r["attention_queries"]
    state = r["state_output"][..., 0].clone()  # [b, channels, state_size], the cache's layout
    y = update(state, x[:, 0, :, 0], raw[:, 0], r["decay_rates"], B[:, 0, 0], C[:, 0, 0], module.D.float(),
               dt_bias=torch.zeros_like(module.dt_proj.bias.float()), dt_softplus=True)
    outputs, states = _recurrence(host, r, extra=(x[:, :1], raw[:, :1], B[:, :1], C[:, :1]))
    return [(outputs[:, -1, :, 0], y), (states[:, -1, :, 0], state)]


CONV_RELATIONS = conv.conv_relations(conv_input, "in_proj(input)'s x columns (its first intermediate_size)")
RELATIONS = (_scan, _out, _states, _decode, *CONV_RELATIONS)


def relations(normed: bool, gain: bool = False) -> tuple:
    """A Mamba-1 mixer's relations; ``normed``, ``gain``: its dt, B and C norms (`inputs_relation`'s)."""
    return inputs_relation(normed, gain), mixer_relation(normed, gain), *RELATIONS


SelectiveScan.RELATIONS = relations(False)


def dim_sizes(channels: int, state_size: int, conv_kernel: int) -> dict[str, int]:
    """The mixer's dimensions, as the shared layouts name them: a channel is a head of value_dim 1."""
    return {"key_heads": 1, "heads": channels, "key_dim": state_size, "value_dim": 1, "conv_dim": channels,
            "conv_kernel": conv_kernel}


#: the root's attention sizes (StandardModel.dim_sizes asks every model for them): a Mamba-1 config names no
#: heads, so its heads are its channels, of head_dim 1, as the state's layout counts them
ROOT_SIZES = {
    "num_heads": property(lambda self: self.text_config.intermediate_size),
    "num_kv_heads": property(lambda self: self.text_config.intermediate_size),
    "head_dim": property(lambda self: 1),
}
