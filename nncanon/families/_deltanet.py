"""The gated DeltaNet mixer (``linear_attn``) of Qwen3.5, Qwen3.5-MoE and Qwen3-Next.

Its interior values are the delta-rule kernel's arguments and results, read at the point
`nncanon.kernels` serves for whichever kernel the call runs (chunked on a prompt, recurrent
on a decode step).
"""

from __future__ import annotations

from ..hosts import host
from ..layouts import Gates, LinearQK, LinearV, MaybeState, Residual, State
from ..locators import Tap, own
from ..values import Value

_KERNEL = "the kernel this call runs (a prompt's chunked one or a decode step's recurrent one)"


def kernel_arg(element) -> Tap:
    return Tap(io="input", element=element, name="kernel", described=_KERNEL)


def kernel_out(element) -> Tap:
    return Tap(io="output", element=element, name="kernel", described=_KERNEL)


LinearAttentionBase = host("LinearAttentionBase", values=[
    Value("attention_output", Residual, "What the mixer adds to the residual stream", own("output")),
], HOST="model.layers[i].linear_attn")

DeltaNet = host("DeltaNet", LinearAttentionBase, values=[
    Value("attention_queries", LinearQK, "The queries entering the delta rule", kernel_arg(0)),
    Value("attention_keys", LinearQK, "The keys entering the delta rule", kernel_arg(1)),
    Value("attention_values", LinearV, "The values entering the delta rule", kernel_arg(2)),
    Value("decays", Gates, "The per-token log decay of the recurrent state", kernel_arg("g")),
    Value("betas", Gates, "The per-token write strength into the state", kernel_arg("beta")),
    Value("state_input", MaybeState,
          "The recurrent state entering the layer, or None at the start of a prompt (a copy of the cache's buffer)",
          kernel_arg("initial_state")),
    Value("attention_head_outputs", LinearV,
          "The per-head outputs before the gated norm and the output projection", kernel_out(0)),
    Value("state_output", State, "The recurrent state leaving the layer", kernel_out(1)),
], HOST="model.layers[i].linear_attn")

KERNELS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")
