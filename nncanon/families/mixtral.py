"""Mixtral (MixtralForCausalLM, model_type mixtral): Mistral's block with a sparse mixture of experts.

The attention is Mistral's: grouped-query, the rotary embedding on every dimension of every head,
no query/key norms, no biases, called with config.sliding_window as its window. Mixtral-8x7B sets
none (null), so every block attends to the whole prefix. MixtralAttention, like MistralAttention,
has no window attribute of its own, so its host is the mistral family's, whose relations read the
window from the config.

The MLP of every block is a mixture of num_local_experts (8) SwiGLU experts with no shared expert:
the router (native name gate, one weight matrix without a bias) gives each token one logit per
expert, a softmax over all eight (in float32) picks the num_experts_per_tok (2) largest, and those
two probabilities are always divided by their sum (MixtralTopKRouter has no norm_topk_prob
switch), so a token's two expert_weights add up to one. The fused experts add up their weighted
outputs; nothing else is added, so routed_output is the whole MLP output. intermediate_size is
each expert's width (Mixtral has no dense MLP). The router's relation on this page states the
renormalisation outright, instead of reading a norm_topk_prob the router does not have.
"""

from __future__ import annotations

import sys

from transformers.models.mixtral import modeling_mixtral as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import MOE_RELATIONS, MoE, MoEBlock, moe_dim_sizes, routing
from . import mistral

FAMILY = "mixtral"
MODEL_TYPES = ("mixtral",)
RENAME = {**TEXT_RENAME, "gate": "router"}

#: Mixtral's router always renormalises its top-k (MixtralTopKRouter divides by the sum unconditionally)
Mixture = host("Mixture", MoE, RELATIONS=(routing(True), *MOE_RELATIONS[1:]))

ENVOYS = {hf.MixtralDecoderLayer: MoEBlock, hf.MixtralAttention: mistral.MistralAttention,
          hf.MixtralSparseMoeBlock: Mixture}
ROOT = host("MixtralStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.MixtralForCausalLM)
layer_types = mistral.layer_types  # sliding_attention on every block when the config sets a window
prepare = nothing_to_prepare
dim_sizes = moe_dim_sizes


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts"]
