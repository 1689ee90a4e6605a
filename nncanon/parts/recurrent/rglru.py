"""Griffin's recurrent block (RecurrentGemma's ``RecurrentGemmaRecurrentBlock``): a gated branch times the RG-LRU.

The block's input goes two ways: ``linear_y`` and the activation give ``output_gates``; ``linear_x`` gives
``conv_input``, which a depthwise causal convolution ``conv_1d`` (``conv1d_width`` wide) turns into
``conv_output``, the RG-LRU's input x. The RG-LRU (``rg_lru``) keeps one number per channel, ``[batch,
lru_width]``, and per token:

- ``input_gates`` i = sigmoid(x W_i + b_i) and ``time_steps`` r = sigmoid(x W_a + b_a), each with one
  ``lru_width / heads`` square weight per head (block-diagonal);
- ``decay_rates`` = -8 · softplus(Λ) per channel (Λ = ``recurrent_param``), and ``decays`` log a = r ·
  ``decay_rates``: the decay factorises as Mamba-2's dt · A and the DeltaNet's gate do, and takes their names;
- the state: h = a · h + √(1 − a²) · i · x, reset at a sequence's first position (h = i · x there).

The block's output is ``linear_out(states · output_gates)``: the RG-LRU's output is the state after each token,
``states [batch, seq, lru_width]``, which the module itself computes on every call (no kernel route needed).
``state_input`` / ``state_output`` are the state a call starts from and leaves for the next
(``rg_lru.recurrent_states``: the module keeps it itself, not the cache object); ``conv_state_input`` /
``conv_state_output`` are the conv's last ``conv1d_width − 1`` input columns the block keeps
(``conv1d_state``), ``[batch, lru_width, conv_kernel]`` with ``conv_kernel = conv1d_width − 1``. A prompt
(more than one token) starts afresh: its convolution reads no previous columns and its first position resets
the state, so both ``*_input`` values are None on a prompt; a decode step reads both. An edit of a served
state is what the module keeps for the next call.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ...core.hosts import host
from ...core.layouts import Residual, layout
from ...core.locators import FIRST, Tap, child, own
from ...core.precision import SUBBLOCK
from ...core.relations import relation
from ...core.values import Value, View
from ...core.views import READ_ONLY
from .conv import ConvState, MaybeConvState
from .deltanet import human_bytes

Lru = layout("LruChannels", "batch seq lru_width")
LruState = layout("LruState", "batch lru_width")
MaybeLruState = layout("LruState | None", "batch lru_width")
PerChannel = layout("PerChannel", "lru_width")

STATE, CONV_STATE = "lru_state", "conv_state"  #: the taps: ``{path}.lru_state.input`` / ``.output``, ...


def gates(lru: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(input gate, recurrence gate) of the RG-LRU ``lru`` on ``x [batch, seq, lru_width]``, per head block, by
    einsum (the module uses baddbmm over heads)."""
    blocks = x.unflatten(-1, (lru.num_attention_heads, lru.block_width))
    i = torch.sigmoid(torch.einsum("bshi,hij->bshj", blocks, lru.input_gate_weight) + lru.input_gate_bias)
    r = torch.sigmoid(torch.einsum("bshi,hij->bshj", blocks, lru.recurrent_gate_weight) + lru.recurrent_gate_bias)
    return i.flatten(-2), r.flatten(-2)


def _rates(lru: Any) -> torch.Tensor:
    return -8.0 * F.softplus(lru.recurrent_param)


def _view(name: str, pick) -> View:
    return View(name, lambda host, x: pick(host._module.rg_lru, x), None, derived=True)


_STATE = "the RG-LRU's recurrent state the module keeps between calls (rg_lru.recurrent_states)"
_CONV = "the convolution's input columns the block keeps between calls (conv1d_state)"


def state_bytes(config: Any) -> int:
    """Bytes of one block's recurrent state: lru_width float32 numbers (the module keeps it in float32)."""
    return config.lru_width * 4


def states_note(model: Any) -> str:
    return (f"{human_bytes(state_bytes(model.text_config))} per token per block (lru_width "
            f"{model.text_config.lru_width}, float32); the module keeps one such state per recurrent block")


RGLRU = host("RGLRU", values=[
    Value("output_gates", Lru, "act(linear_y(input)): the branch the RG-LRU's states are multiplied by",
          child("act_fn")),
    Value("conv_input", Lru, "linear_x(input): what the convolution reads", child("linear_x")),
    Value("conv_state_input", MaybeConvState, "The conv state entering the block on a decode step: the conv's "
          "input at the last conv1d_width − 1 positions; None on a prompt, whose convolution reads no previous "
          "columns", Tap(io="input", element=0, name=CONV_STATE, described=_CONV)),
    Value("conv_output", Lru, "The depthwise causal convolution of conv_input: the RG-LRU's input x",
          child("rg_lru", "input", element=FIRST)),
    Value("input_gates", Lru, "i = sigmoid(x W_i + b_i), per head block: how much of x enters the state; derived, "
          "read-only", child("rg_lru", "input", element=FIRST), view=_view("input gate", lambda lru, x: gates(lru, x)[0])),
    Value("time_steps", Lru, "r = sigmoid(x W_a + b_a), per head block: the recurrence gate, scaling each token's "
          "decay; derived, read-only", child("rg_lru", "input", element=FIRST),
          view=_view("recurrence gate", lambda lru, x: gates(lru, x)[1])),
    Value("decay_rates", PerChannel, "-8 · softplus(recurrent_param): each channel's log decay at a full gate; "
          "derived, read-only", child("rg_lru", "input", element=FIRST), view=_view("rates", lambda lru, x: _rates(lru))),
    Value("decays", Lru, "The per-token log decay log a = time_steps · decay_rates; derived, read-only",
          child("rg_lru", "input", element=FIRST), view=_view("log a", lambda lru, x: gates(lru, x)[1] * _rates(lru))),
    Value("state_input", MaybeLruState, "The recurrent state entering the block on a decode step (a copy of what "
          "the module keeps); None on a prompt, whose first position resets it", Tap(io="input", element=0, name=STATE,
                                                                                    described=_STATE)),
    Value("states", Lru, "The recurrent state after every token of this call (the RG-LRU's output); read-only",
          child("rg_lru"), view=READ_ONLY, note=states_note),
    Value("state_output", LruState, "The recurrent state leaving the block: what the next call starts from",
          Tap(io="output", name=STATE, described=_STATE), reaches="the next call"),
    Value("conv_state_output", ConvState, "The conv state leaving the block: the conv's input at the last "
          "conv1d_width − 1 positions, what the next decode step convolves with its own column",
          Tap(io="output", name=CONV_STATE, described=_CONV), reaches="the next call"),
    Value("attention_output", Residual, "What the block adds to the residual stream: linear_out(states · "
          "output_gates)", own("output", element=FIRST)),
], HOST="model.layers[i].mixer", KIND="RG-LRU recurrent block")


# -- serving the states the module keeps on itself ---------------------------------------------------------


def _serve(envoy: Any, provider: str, value: Any) -> Any:
    """Serve ``value`` at ``provider`` in a trace and return what comes back (edited or not); an input is served
    as a call's arguments, ``((value,), {})``, as a module's input is."""
    interleaver = envoy.interleaver
    if not interleaver.interleaving:
        return value
    if provider.endswith(".input"):
        (value,), _ = interleaver.handle(provider, ((value,), {}))
        return value
    return interleaver.handle(provider, value)


def track(envoy: Any) -> None:
    """Serve the block's conv state and its RG-LRU's state on entry and exit; what is served back is kept."""
    block = envoy._module
    lru = block.rg_lru
    path = envoy.path

    def block_in(module, args, kwargs):
        states = args[0] if args else kwargs["input_states"]
        decode = states.shape[1] == 1 and block.conv1d_state is not None
        served = _serve(envoy, f"{path}.{CONV_STATE}.input", block.conv1d_state.clone() if decode else None)
        if decode and served is not None:
            block.conv1d_state = served

    def block_out(module, args, kwargs, output):
        if block.conv1d_state is not None:
            block.conv1d_state = _serve(envoy, f"{path}.{CONV_STATE}.output", block.conv1d_state.clone())

    def lru_in(module, args):
        decode = args[0].shape[1] == 1 and lru.recurrent_states is not None
        served = _serve(envoy, f"{path}.{STATE}.input", lru.recurrent_states.clone() if decode else None)
        if decode and served is not None:
            lru.recurrent_states = served

    def lru_out(module, args, output):
        if lru.recurrent_states is not None:
            lru.recurrent_states = _serve(envoy, f"{path}.{STATE}.output", lru.recurrent_states.clone())

    block.register_forward_pre_hook(block_in, with_kwargs=True)
    block.register_forward_hook(block_out, with_kwargs=True)
    lru.register_forward_pre_hook(lru_in)
    lru.register_forward_hook(lru_out)


def prepare(model: Any) -> None:
    for envoy in model._hosts:
        if isinstance(envoy, RGLRU):
            track(envoy)


# -- relations: what the block's values mean -----------------------------------------------------------------


def _input(r) -> torch.Tensor:
    args, kwargs = r["inputs"]
    return args[0] if args else kwargs["input_states"]


# one hidden_size-term projection and an activation, by the module's own layers on the same input (STEP)
@relation("output_gates == act(linear_y(input)); conv_input == linear_x(input)", proves="output_gates conv_input",
          reads="inputs output_gates conv_input")
def _branches(host, r):
    module, x = host._module, _input(r)
    return [(module.act_fn(module.linear_y(x)), r["output_gates"]), (module.linear_x(x), r["conv_input"])]


def _window(previous, columns):
    return columns if previous is None else torch.cat([previous.to(columns), columns], dim=-1)


# a conv1d_width-term sum per output (STEP)
@relation("conv_output == the depthwise causal convolution of [conv_state_input (a prompt's: none, zeros on the "
          "left), conv_input] by conv_1d, its last seq columns", proves="conv_output conv_state_input",
          reads="conv_state_input conv_input conv_output")
def _conv(host, r):
    conv = host._module.conv_1d
    columns = r["conv_input"].transpose(1, 2)
    window = _window(r["conv_state_input"], columns)
    kernel = conv.kernel_size[0]
    out = F.conv1d(F.pad(window, (kernel - 1, 0)), conv.weight, conv.bias, groups=window.shape[1])
    return [(out[..., -columns.shape[-1]:].transpose(1, 2), r["conv_output"])]


@relation("conv_state_output == the last conv1d_width − 1 columns of [conv_state_input (a prompt's: none), "
          "conv_input], zeros on the left where shorter", proves="conv_state_output",
          reads="conv_state_input conv_input conv_state_output")
def _conv_window(host, r):
    keep = host._module.conv1d_width - 1
    window = _window(r["conv_state_input"], r["conv_input"].transpose(1, 2))
    return [(F.pad(window, (max(0, keep - window.shape[-1]), 0))[..., -keep:], r["conv_state_output"])]


# the gates recomputed by einsum against the module's baddbmm: a block_width-term sum each (STEP)
@relation("input_gates == sigmoid(conv_output · input_gate_weight + input_gate_bias), time_steps == sigmoid("
          "conv_output · recurrent_gate_weight + recurrent_gate_bias), per head block; decay_rates == -8 · "
          "softplus(recurrent_param); decays == time_steps · decay_rates",
          proves="input_gates time_steps decay_rates decays",
          reads="conv_output input_gates time_steps decay_rates decays")
def _gates(host, r):
    lru = host._module.rg_lru
    blocks = r["conv_output"].unflatten(-1, (lru.num_attention_heads, lru.block_width))
    i = torch.sigmoid((blocks.unsqueeze(-2) @ lru.input_gate_weight).squeeze(-2) + lru.input_gate_bias)
    a = torch.sigmoid((blocks.unsqueeze(-2) @ lru.recurrent_gate_weight).squeeze(-2) + lru.recurrent_gate_bias)
    rates = -8.0 * torch.log1p(torch.exp(lru.recurrent_param.double()))
    return [(i.flatten(-2), r["input_gates"]), (a.flatten(-2), r["time_steps"]), (rates, r["decay_rates"]),
            (r["time_steps"].double() * r["decay_rates"].double(), r["decays"])]


def recurrence(x, i, log_a, reset, state=None):
    """The RG-LRU in float64, token by token: every token's state ``[batch, seq, width]``."""
    x, i, log_a = (t.detach().double() for t in (x, i, log_a))
    a = torch.exp(log_a)
    h = torch.zeros_like(x[:, 0]) if state is None else state.detach().double()
    states = []
    for t in range(x.shape[1]):
        first = reset[:, t, None]
        scale = torch.where(first, torch.ones_like(a[:, t]), torch.sqrt(1 - a[:, t] ** 2))
        h = torch.where(first, torch.zeros_like(h), a[:, t] * h) + scale * i[:, t] * x[:, t]
        states.append(h)
    return torch.stack(states, 1)


def _positions(host, r) -> torch.Tensor:
    args, kwargs = r["inputs"]
    return kwargs["position_ids"] if "position_ids" in kwargs else args[1]


# a float64 recurrence against the module's float32 one: per token a few roundings, decayed by a < 1, over the
# prompt's tokens; SUBBLOCK (800 roundings) bounds it with the gates' own roundings
@relation("states == the recurrence from state_input (a prompt's: none), token by token: state = exp(decays) · "
          "state + √(1 − exp(2 · decays)) · input_gates · conv_output, reset at position 0 to input_gates · "
          "conv_output; state_output == states[:, -1]", proves="states state_input state_output",
          reads="inputs conv_output input_gates decays state_input states state_output", tolerance=SUBBLOCK)
def _scan(host, r):
    positions = _positions(host, r)
    reset = (positions == 0).expand(r["states"].shape[0], -1)
    states = recurrence(r["conv_output"], r["input_gates"], r["decays"], reset, r["state_input"])
    return [(states, r["states"]), (r["states"][:, -1], r["state_output"])]


# out of the module itself on the same inputs (STEP)
@relation("attention_output == linear_out(states · output_gates)", proves="attention_output",
          reads="states output_gates attention_output")
def _out(host, r):
    return [(host._module.linear_out(r["states"] * r["output_gates"]), r["attention_output"])]


@relation("states[:, t] == the state the model's own rg_lru keeps after the prompt cut at t (run on conv_output "
          "up to t from state_input), on every t; a decode step from state_output: rg_lru on one next column c "
          "== exp(decay(c)) · state_output + √(1 − exp(2 · decay(c))) · input_gate(c) · c",
          proves="states state_output", reads="inputs conv_output state_input states state_output",
          tolerance=SUBBLOCK)
def _cut(host, r):
    lru = host._module.rg_lru
    kept = lru.recurrent_states
    positions = _positions(host, r).expand(r["states"].shape[0], -1)
    pairs = []
    try:
        with torch.no_grad():
            for t in range(r["conv_output"].shape[1]):
                lru.recurrent_states = None if r["state_input"] is None else r["state_input"].clone()
                lru(r["conv_output"][:, :t + 1], positions[:, :t + 1])
                pairs.append((lru.recurrent_states, r["states"][:, t]))
            c = r["conv_output"][:, :1]
            lru.recurrent_states = r["state_output"].clone()
            stepped = lru(c, positions[:, -1:] + 1)
            i, a = gates(lru, c)
            log_a = a * _rates(lru)
            expected = torch.exp(log_a[:, 0]) * r["state_output"] + torch.sqrt(1 - torch.exp(2 * log_a[:, 0])) * \
                i[:, 0] * c[:, 0]
            pairs.append((expected, stepped[:, 0]))
    finally:
        lru.recurrent_states = kept
    return pairs


RGLRU.RELATIONS = (_branches, _conv, _conv_window, _gates, _scan, _out, _cut)


def dim_sizes(model: Any) -> dict[str, int]:
    config = model.text_config
    return {"lru_width": config.lru_width, "conv_dim": config.lru_width, "conv_kernel": config.conv1d_width - 1}


__all__ = ["RGLRU", "prepare", "dim_sizes", "recurrence", "gates"]
