"""gpt-oss (GptOssForCausalLM, model_type gpt_oss): attention sinks, alternating windows, a clamped-SwiGLU mixture.

The block is pre-norm, Llama's shape: RMSNorm -> attention -> add, RMSNorm -> mixture -> add. The
attention is grouped-query with biases on every projection and one learned **sink** logit per head
(``self_attn.sinks``): the eager attention appends it to each query's row of scores as one more
column, takes the softmax over keys and sink together, and drops the sink's column before mixing
the values. So a query's ``attention_probabilities`` over the keys add up to less than one: the rest,
``attention_sink_probability``, is the mass the sink took, given to no value. ``attention_scores``
are the scores over the keys (queries · keysᵀ · head_dim^-0.5, masked) before the sink joins them.
``layer_types`` alternates sliding_attention (a window of ``sliding_window`` keys) and
full_attention from block 0. The rotary is YaRN. transformers runs gpt-oss with eager attention on
CPU (no sdpa: the sink is not an sdpa argument); every value is read under it.

The MLP of every block is a mixture with no shared expert: the router (a linear with a bias) gives
each token one logit per expert, ``torch.topk`` keeps the ``num_experts_per_tok`` largest *logits*,
and the softmax runs over those alone, so a token's ``expert_weights`` add up to one and no
probability over all the experts is ever formed. The fused experts (stored ``[experts, in, out]``,
with biases) apply a clamped SwiGLU to their interleaved gate/up columns: the gate clamped above at
``swiglu_limit``, the up clamped to ±``swiglu_limit``, then ``(up + 1) · gate · sigmoid(swiglu_alpha ·
gate)``. The mixture returns (output, router scores); ``mlp_output`` is the first.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.gpt_oss import modeling_gpt_oss as hf

from ..core.hosts import host
from ..core.layouts import Layout, Pattern, Residual
from ..core.locators import call, op, own
from ..core.model import StandardModel
from ..core.precision import SUBBLOCK
from ..core.relations import first, relation, rows
from ..core.values import Value
from ..core.views import derived
from ..parts.attention.softmax import (
    ATTENTION_RELATIONS,
    EAGER,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    Attention,
    causal_mask,
    real_queries,
)
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import MOE_RELATIONS, MoE, MoEBlock, chosen_softmax_routing, moe_dim_sizes
from ..research.weights import Weight

FAMILY = "gpt_oss"
MODEL_TYPES = ("gpt_oss",)
RENAME = TEXT_RENAME

_CALL = call("attention_interface_1")  # found by what it calls (`Call`)

SinkProbability = Layout("SinkProbability", ("batch", "num_heads", "query"))

# -- attention with a sink per head ------------------------------------------------------------------


def sink_pattern(module, queries, keys, padding):
    """(scores over the keys, probabilities over the keys, the sink's probability) in float64, by the
    module's math written out: scores scaled and masked (causal, within its window), the head's sink
    logit appended as one more column, the softmax over both, the column split off again."""
    import torch

    queries, keys = queries.double(), keys.double()
    keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    scores = queries @ keys.transpose(-1, -2) * module.scaling
    scores = scores + causal_mask(module, padding, queries.shape[2], keys.shape[2]).double()
    sinks = module.sinks.double().reshape(1, -1, 1, 1).expand(*scores.shape[:3], 1)
    combined = torch.cat([scores, sinks], dim=-1).softmax(-1)
    return scores, combined[..., :-1], combined[..., -1]


@relation("attention_head_outputs == softmax([attention_queries · attention_keysᵀ · scaling + causal mask, sinks])"
          "[..., :-1] · attention_values: the head's sink logit joins each query's softmax and takes no value",
          proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _sink_attention(host, r):
    padding = r["model.attention_mask"]
    _, probabilities, _ = sink_pattern(host._module, r["attention_queries"], r["attention_keys"], padding)
    values = r["attention_values"].double()
    values = values.repeat_interleave(probabilities.shape[1] // values.shape[1], 1)
    heads = (probabilities @ values).transpose(1, 2)
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + causal mask; "
          "attention_probabilities, attention_sink_probability == softmax([attention_scores, sinks]) split at "
          "the sink's column; Σ over keys of attention_probabilities + attention_sink_probability == 1 per query",
          proves="attention_scores attention_probabilities attention_sink_probability",
          reads="model.attention_mask attention_queries attention_keys attention_scores attention_probabilities "
                "attention_sink_probability",
          tolerance=SUBBLOCK)
def _sink_scores(host, r):
    import torch

    padding = r["model.attention_mask"]
    scores, probabilities, sink = sink_pattern(host._module, r["attention_queries"], r["attention_keys"], padding)
    read_scores = r["attention_scores"].double()
    allowed = torch.isfinite(scores)  # transformers masks with the dtype's minimum, not -inf
    read_probabilities, read_sink = r["attention_probabilities"].double(), r["attention_sink_probability"].double()
    total = read_probabilities.sum(-1) + read_sink
    return [(scores[allowed], read_scores[allowed]),
            (real_queries(padding, probabilities, 2), real_queries(padding, read_probabilities, 2)),
            (real_queries(padding, sink, 2), real_queries(padding, read_sink, 2)),
            (torch.ones_like(total), total)]


SINK_ATTENTION_RELATIONS = (_sink_attention, _sink_scores, HEAD_RESULTS_RELATION, *LINK_RELATIONS,
                            ATTENTION_RELATIONS[-1])  # o_proj as everywhere
assert ATTENTION_RELATIONS[-1].text == "attention_output == o_proj(attention_premix)"

SinkAttention = host("SinkAttention", Attention, values=[
    Value("attention_scores", Pattern,
          "The attention scores over the keys, masked, before the head's sink logit joins them",
          op(_CALL, "attn_weights_1"), conditions=(EAGER,)),
    Value("attention_sink_probability", SinkProbability,
          "The probability the head's sink takes from each query: 1 minus its probabilities over the keys; "
          "read-only (the forward drops it)",
          op(_CALL, "F_softmax_0"), view=derived("the sink's column", lambda x: x[..., -1]), conditions=(EAGER,)),
], RELATIONS=SINK_ATTENTION_RELATIONS)

# -- the mixture: softmax over the chosen logits, clamped SwiGLU experts --------------------------------


_routing = chosen_softmax_routing(bias=True)


def clamped_swiglu(experts, gate_up):
    """gpt-oss's expert activation on interleaved gate/up columns, written out: the gate clamped above
    at ``limit``, the up to ±``limit``, then ``(up + 1) · gate · sigmoid(alpha · gate)``."""
    import torch

    gate, up = gate_up[..., ::2].clamp(max=experts.limit), gate_up[..., 1::2].clamp(-experts.limit, experts.limit)
    return (up + 1) * gate * torch.sigmoid(gate * experts.alpha)


@relation("expert_outputs[slot] == expert_weights[slot] · (down_proj[e] · clamped_swiglu(gate_up_proj[e] · input + "
          "bias) + bias), e = expert_indices[slot]; clamped_swiglu(g, u) = (clamp(u, ±swiglu_limit) + 1) · "
          "min(g, swiglu_limit) · sigmoid(swiglu_alpha · min(g, swiglu_limit))",
          proves="expert_outputs", reads="input expert_indices expert_weights expert_outputs", tolerance=SUBBLOCK)
def _experts(host, r):
    read = r["expert_outputs"]
    return [(_slots(host, r), read.reshape(-1, *read.shape[-2:]))]


def _slots(host, r):
    """Each token's routing slots' weighted expert outputs ``[tokens, top_k, hidden]``, in float64 from the input,
    the router's choice and the experts' parameters."""
    experts = host._module.experts
    x = rows(first(r["input"])).double()
    indices, weights = rows(r["expert_indices"]).long(), rows(r["expert_weights"]).double()
    gate_up = (x[:, None, None, :] @ experts.gate_up_proj.double()[indices]).squeeze(-2)
    gate_up = gate_up + experts.gate_up_proj_bias.double()[indices]
    out = (clamped_swiglu(experts, gate_up)[..., None, :] @ experts.down_proj.double()[indices]).squeeze(-2)
    return (out + experts.down_proj_bias.double()[indices]) * weights[..., None]


@relation("routed_output == Σ over routing slots of expert_weights[slot] · expert e(input), e = expert_indices[slot]",
          proves="routed_output", reads="input expert_indices expert_weights routed_output", tolerance=SUBBLOCK)
def _routed(host, r):
    """The link from the router's choice to the routed output that holds under every load: the eager experts loop
    over experts and never hold expert_outputs, which the slot-by-slot relations read. The slots' sum in float64
    against the forward's float32 (top_k terms): SUBBLOCK."""
    return [(_slots(host, r).sum(dim=1), rows(r["routed_output"]))]


def _interleaved(host: Any, part: str, bias: bool) -> Any:
    """gpt-oss's experts: ``gate_up_proj [experts, hidden, 2·intermediate]`` stored ``[in, out]`` with the gate in
    the even columns and the up in the odd ones (its ``_apply_gate``: ``gate_up[..., ::2], gate_up[..., 1::2]``),
    ``down_proj [experts, intermediate, hidden]``, each with a bias: strided views, so an edit lands."""
    experts = host.experts._module
    if part == "out":
        return experts.down_proj_bias if bias else experts.down_proj
    fused = experts.gate_up_proj_bias if bias else experts.gate_up_proj
    return fused[..., 0::2] if part == "gate" else fused[..., 1::2]


#: the per-expert weights (nncanon.weights' names) over the interleaved fused experts
EXPERT_WEIGHTS = {w.name: w for w in [
    Weight("W_in", "num_experts hidden_size intermediate_size",
       "Each expert's up projection: the odd columns of experts.gate_up_proj", lambda h: _interleaved(h, "in", False)),
    Weight("W_gate", "num_experts hidden_size intermediate_size",
       "Each expert's gate projection: the even columns of experts.gate_up_proj",
       lambda h: _interleaved(h, "gate", False)),
    Weight("W_out", "num_experts intermediate_size hidden_size", "Each expert's down projection (experts.down_proj)",
       lambda h: _interleaved(h, "out", False)),
    Weight("b_in", "num_experts intermediate_size", "Each expert's up bias: the odd entries of gate_up_proj_bias",
       lambda h: _interleaved(h, "in", True)),
    Weight("b_gate", "num_experts intermediate_size", "Each expert's gate bias: the even entries of gate_up_proj_bias",
       lambda h: _interleaved(h, "gate", True)),
    Weight("b_out", "num_experts hidden_size", "Each expert's down bias (experts.down_proj_bias)",
       lambda h: _interleaved(h, "out", True)),
]}


@relation("expert_outputs[slot] == expert_weights[slot] · (clamped_swiglu(input · W_gate[e] + b_gate[e], input · "
          "W_in[e] + b_in[e]) · W_out[e] + b_out[e]), e = expert_indices[slot]: the per-expert weights, strided "
          "views of the interleaved gate_up_proj", proves="", reads="input expert_indices expert_weights expert_outputs",
          tolerance=SUBBLOCK)
def _expert_weights(host, r):
    import torch

    experts = host._module.experts
    x = rows(first(r["input"])).double()
    indices, weights = rows(r["expert_indices"]).long(), rows(r["expert_weights"]).double()
    gate = torch.einsum("td,tkdi->tki", x, host.W_gate.double()[indices]) + host.b_gate.double()[indices]
    up = torch.einsum("td,tkdi->tki", x, host.W_in.double()[indices]) + host.b_in.double()[indices]
    gate, up = gate.clamp(max=experts.limit), up.clamp(-experts.limit, experts.limit)
    neurons = (up + 1) * gate * torch.sigmoid(gate * experts.alpha)
    out = torch.einsum("tki,tkid->tkd", neurons, host.W_out.double()[indices]) + host.b_out.double()[indices]
    read = r["expert_outputs"]
    return [(out * weights[..., None], read.reshape(-1, *read.shape[-2:]))]


Mixture = host("Mixture", MoE, values=[
    Value("mlp_output", Residual, "What the MLP adds to the residual stream", own("output", element=0)),
], RELATIONS=(_routing, _experts, *MOE_RELATIONS[1:], _expert_weights, _routed), **EXPERT_WEIGHTS)

ENVOYS = {hf.GptOssDecoderLayer: MoEBlock, hf.GptOssAttention: SinkAttention, hf.GptOssMLP: Mixture}
ROOT = host("GptOssStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.GptOssForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
dim_sizes = moe_dim_sizes


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts"]
