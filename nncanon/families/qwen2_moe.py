"""Qwen2-MoE / Qwen1.5-MoE (Qwen2MoeForCausalLM, model_type qwen2_moe): Qwen2's attention over a mixture with a shared expert.

The attention is Qwen2's: grouped-query (Qwen2-57B-A14B) or full multi-head (Qwen1.5-MoE-A2.7B),
with a bias on the query, key and value projections (qkv_bias) and the rotary embedding on every
dimension; no query/key norms. The MLP of every block is a mixture of fused SwiGLU experts plus
one shared expert that every token goes through: the router (native name gate, one weight matrix)
takes a softmax over all the experts and keeps the num_experts_per_tok largest probabilities,
divided by their sum only when norm_topk_prob, which defaults to false and is false on every
released checkpoint, so a token's expert_weights add up to less than one. The shared expert
(native name shared_expert, an MLP of width shared_expert_intermediate_size) is scaled per token
by sigmoid(shared_expert_gate(x)), one logit from a one-row linear, and added to the routed
output: mlp_output = routed_output + shared_expert_output, as in Qwen3-Next and Qwen3.5-MoE.
A config may keep some blocks dense (mlp_only_layers, decoder_sparse_step) or make some
attention sliding-window (use_sliding_window); the released checkpoints do neither, and this
family refuses a checkpoint with dense blocks.
"""

from __future__ import annotations

import sys

from transformers.models.qwen2_moe import modeling_qwen2_moe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import MoEBlock, SharedMoE, moe_dim_sizes, require_every_block_sparse
from ..parts.blocks.mlp import TokenMLP

FAMILY = "qwen2_moe"
MODEL_TYPES = ("qwen2_moe",)
RENAME = {**TEXT_RENAME, "gate": "router", "shared_expert": "shared_experts"}
# The router honours norm_topk_prob, so the shared relation (renormalised when norm_topk_prob) states it;
# the shared expert and its sigmoid gate are Qwen3-Next's, the forward's second shared_expert_output.
ENVOYS = {hf.Qwen2MoeDecoderLayer: MoEBlock, hf.Qwen2MoeAttention: Attention, hf.Qwen2MoeSparseMoeBlock: SharedMoE,
          hf.Qwen2MoeMLP: TokenMLP}
ROOT = host("Qwen2MoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Qwen2MoeForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
dim_sizes = moe_dim_sizes


def required_paths(model: StandardModel) -> list[str]:
    require_every_block_sparse(model, FAMILY)
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts", "layers.0.mlp.shared_experts"]
