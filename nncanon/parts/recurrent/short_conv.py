"""The gated short convolution (LFM2's ``Lfm2ShortConv``): a mixer whose whole recurrent state is its conv window.

``in_proj`` maps the normed stream to three ``hidden_size`` thirds, B, C and x (in that order); the
mixer convolves ``B · x`` over the last ``conv_L_cache`` tokens with a depthwise causal convolution (no
activation), multiplies the result by C and projects it back with ``out_proj``. It has no recurrence
beyond the convolution, so what a decode cache keeps of it is `conv`'s conv state alone:
``conv_state_input`` / ``conv_state_output`` ``[batch, conv_dim, conv_kernel]`` with ``conv_dim =
hidden_size`` (the B·x channels) and ``conv_kernel = conv_L_cache``, the same names and layout as the
conv state of Mamba-2 and the DeltaNet. ``conv_states`` is that state after every token of the call,
``[batch, seq, conv_dim, conv_kernel]``: the short convolution's ``states`` (built only when read,
under every kernel route: it needs no token-by-token kernel).

The conv is the modeling module's ``causal_conv1d_fn`` on a prompt and ``causal_conv1d_update`` on a
cached decode step, the two functions `conv.tap` wraps for Mamba-2, so every value exists on a prompt
and on a decode step alike, and an edit of the served conv state is what the cache keeps.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ...core import kernels
from ...core.hosts import host
from ...core.layouts import Residual, layout
from ...core.locators import child, own
from ...core.relations import relation
from ...core.values import Value, View
from . import conv
from .deltanet import human_bytes

#: B, C, x and what the conv reads and gives: one number per hidden channel per token
Channels = layout("Channels", "batch seq hidden_size")


def _third(index: int, what: str) -> View:
    def read(host, projected):
        size = projected.shape[-1] // 3
        return projected[..., index * size:(index + 1) * size]
    return View(f"{what}: in_proj's output, third {index + 1} of 3", read, None)


def _transposed(x):
    return x.transpose(-1, -2)


#: the conv's [batch, channels, seq] as [batch, seq, channels]; a view, so an edit lands where the conv reads it
AS_CHANNELS = View("transposed to [batch seq hidden_size]", lambda host, x: _transposed(x),
                   lambda host, new, current: _transposed(new).contiguous())


def conv_state_bytes(config: Any) -> int:
    """Bytes of one block's conv state in a decode cache: hidden_size x conv_L_cache in the model's dtype."""
    return conv.conv_state_bytes(config.hidden_size, config.conv_L_cache, config)


def conv_state_note(model: Any) -> str:
    config = model.text_config
    return (f"{human_bytes(conv_state_bytes(config))} per block in a decode cache ({config.hidden_size} channels of "
            f"B·x x {config.conv_L_cache} positions, {conv.dtype_name(config)})")


def conv_states_note(model: Any) -> str:
    config = model.text_config
    return (f"materialized only when read: {human_bytes(conv_state_bytes(config))} per token per block "
            f"(hidden_size x conv_L_cache, {conv.dtype_name(config)})")


ShortConv = host("ShortConv", values=[
    Value("input_gates", Channels, "B: the gate each channel's x is multiplied by before the convolution; read-only",
          child("in_proj"), view=_third(0, "B")),
    Value("output_gates", Channels, "C: the gate the convolution's output is multiplied by; read-only",
          child("in_proj"), view=_third(1, "C")),
    Value("conv_input", Channels, "B · x: what the convolution reads, one column per token of this call",
          conv.conv_arg(0), view=AS_CHANNELS),
    *conv.conv_values("B · x", note=conv_state_note),
    Value("conv_output", Channels, "The depthwise causal convolution of B · x over the last conv_L_cache tokens "
          "(no activation)", conv.conv_out(0), view=AS_CHANNELS),
    conv.conv_states_value("B · x", note=conv_states_note),
    Value("attention_output", Residual, "What the mixer adds to the residual stream: out_proj(C · conv_output)",
          own("output")),
], HOST="model.layers[i].conv", KIND="short convolution mixer")


def prepare(model: Any, modeling: Any, host_class: type = ShortConv) -> None:
    """Wrap ``modeling``'s conv functions and mark the model's short convolutions as running mixers (the tap
    serves the running one)."""
    for envoy in model._hosts:
        if isinstance(envoy, host_class):
            kernels.track(envoy)
    conv.prepare(model, modeling, host_class)


# -- relations: what the mixer's values mean ----------------------------------------------------------------


def projected(host, inputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, C, x) ``[batch, seq, hidden]`` by the mixer's own in_proj on its masked input."""
    return tuple(host._module.in_proj(conv.masked_input(inputs)).chunk(3, dim=-1))


def conv_input(host, inputs) -> torch.Tensor:
    """The conv's input ``[batch, hidden, seq]``: B · x."""
    b, _, x = projected(host, inputs)
    return (b * x).transpose(1, 2)


# in_proj recomputed on the same input by the same module: the same float32 ops in the same order, so equal up
# to a product's rounding (STEP, 80 roundings x unit scale)
@relation("input_gates, output_gates, x == in_proj(input)'s three thirds; conv_input == input_gates · x",
          proves="input_gates output_gates conv_input", reads="inputs input_gates output_gates conv_input")
def _gates(host, r):
    b, c, x = projected(host, r["inputs"])
    return [(b, r["input_gates"]), (c, r["output_gates"]), (b * x, r["conv_input"])]


# a conv_L_cache-term sum per output (<= 4 roundings at unit scale): STEP
@relation("conv_output == the depthwise causal convolution of [conv_state_input, conv_input] (conv.weight, "
          "conv.bias; zeros before a prompt's first token), its last seq columns",
          proves="conv_output", reads="conv_state_input conv_input conv_output")
def _conv(host, r):
    module = host._module
    columns = _transposed(r["conv_input"])
    previous = r["conv_state_input"]
    window = columns if previous is None else torch.cat([previous.to(columns), columns], dim=-1)
    kernel = module.conv.kernel_size[0]
    out = F.conv1d(F.pad(window, (kernel - 1, 0)), module.conv.weight, module.conv.bias, groups=window.shape[1])
    return [(_transposed(out[..., -columns.shape[-1]:]), r["conv_output"])]


# one product and one hidden_size-term projection (STEP)
@relation("attention_output == out_proj(output_gates · conv_output)", proves="output_gates attention_output",
          reads="output_gates conv_output attention_output")
def _out(host, r):
    return [(host._module.out_proj(r["output_gates"] * r["conv_output"]), r["attention_output"])]


@relation("conv_states[:, -1] == conv_state_output; conv_states[:, t] == the conv state the model's own cache keeps "
          "of the prompt cut after token t (a fresh cache's update_conv_state of [conv_state_input, conv_input up "
          "to t]), on every t", proves="conv_states", reads="conv_state_input conv_input conv_state_output conv_states")
def _states(host, r):
    module = host._module
    columns = _transposed(r["conv_input"])
    previous = r["conv_state_input"]
    window = columns if previous is None else torch.cat([previous.to(columns), columns], dim=-1)
    before = window.shape[-1] - columns.shape[-1]
    pairs = [(r["conv_states"][:, -1], r["conv_state_output"])]
    for t in range(columns.shape[-1]):
        cache = _fresh_cache(host)
        cache.update_conv_state(window[..., :before + t + 1].clone(), module.layer_idx,
                                conv_kernel_size=module.conv.kernel_size[0])
        pairs.append((cache.get_conv_state(module.layer_idx), r["conv_states"][:, t]))
    return pairs


def _fresh_cache(host):
    """The cache transformers' generate would make for this model, empty."""
    from transformers import DynamicCache

    return DynamicCache(config=host._std_model._module.config)


CONV_RELATIONS = conv.conv_relations(conv_input, "input_gates · x, in_proj(input)'s first and last thirds")
ShortConv.RELATIONS = (_gates, _conv, _out, _states, *CONV_RELATIONS)


def dim_sizes(model: Any) -> dict[str, int]:
    config = model.text_config
    return {"conv_dim": config.hidden_size, "conv_kernel": config.conv_L_cache}


__all__ = ["ShortConv", "Channels", "prepare", "dim_sizes", "conv_state_bytes", "CONV_RELATIONS"]
