"""Qwen3-MoE (Qwen3MoeForCausalLM, model_type qwen3_moe): Qwen3's attention over a mixture of experts.

The attention is Qwen3's (query/key norms before the rotary). The MLP of every block is a
mixture with no shared expert: the router (native name gate, a plain weight matrix) gives each
token one logit per expert, a softmax over all of them picks the num_experts_per_tok largest,
renormalized to sum to one when norm_topk_prob (true on every released checkpoint), and the
fused experts add up their weighted SwiGLU outputs. A config may keep some blocks dense
(mlp_only_layers, decoder_sparse_step); the released checkpoints make every block sparse, and
this family refuses a checkpoint that does not.
"""

from __future__ import annotations

import sys

from transformers.models.qwen3_moe import modeling_qwen3_moe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.blocks.mixture import MoE, MoEBlock, moe_dim_sizes, require_every_block_sparse
from . import qwen3

FAMILY = "qwen3_moe"
MODEL_TYPES = ("qwen3_moe",)
RENAME = {**qwen3.RENAME, "gate": "router"}
ENVOYS = {hf.Qwen3MoeDecoderLayer: MoEBlock, hf.Qwen3MoeAttention: Attention, hf.Qwen3MoeSparseMoeBlock: MoE}
ROOT = host("Qwen3MoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Qwen3MoeForCausalLM)
layer_types, prepare = qwen3.layer_types, qwen3.prepare
dim_sizes = moe_dim_sizes


def required_paths(model: StandardModel) -> list[str]:
    require_every_block_sparse(model, FAMILY)
    return [*qwen3.required_paths(model), "layers.0.mlp.router", "layers.0.mlp.experts"]
