"""Qwen3-Next (Qwen3NextForCausalLM, model_type qwen3_next).

The hybrid block of the Qwen3.5 line, a generation earlier: three blocks in four carry the gated
DeltaNet mixer linear_attn, the fourth output-gated attention self_attn, and every block's MLP is
a mixture of experts with a shared expert scaled by a sigmoid gate per token (router renormalized
when norm_topk_prob). The DeltaNet projects q, k, v and z in one in_proj_qkvz and b, a in one
in_proj_ba, grouped per key head; the values served (after the split, at the kernel) are laid out
as Qwen3.5's. A config may keep blocks dense (mlp_only_layers, decoder_sparse_step); the released
checkpoint does not, and this family refuses one that does.
"""

from __future__ import annotations

import sys

from transformers.models.qwen3_next import modeling_qwen3_next as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import OutputGatedAttention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, TEXT_RENAME, text_only
from ..parts.blocks.mixture import MoEBlock, SharedMoE, moe_dim_sizes, require_every_block_sparse
from ..parts.blocks.mlp import TokenMLP
from ..parts.recurrent import deltanet
from ..parts.recurrent.deltanet import KERNELS, DeltaNet  # noqa: F401 (the family API, shared)

FAMILY = "qwen3_next"
MODEL_TYPES = ("qwen3_next",)
RENAME = {**TEXT_RENAME, "gate": "router", "shared_expert": "shared_experts"}
ENVOYS = {hf.Qwen3NextDecoderLayer: MoEBlock, hf.Qwen3NextAttention: OutputGatedAttention, hf.Qwen3NextGatedDeltaNet: DeltaNet,
          hf.Qwen3NextSparseMoeBlock: SharedMoE, hf.Qwen3NextMLP: TokenMLP}
ROOT = host("Qwen3NextStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Qwen3NextForCausalLM)
layer_types, explain_missing = deltanet.layer_types, deltanet.explain_missing


def required_paths(model: StandardModel) -> list[str]:
    require_every_block_sparse(model, FAMILY)
    return [*deltanet.HYBRID_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts", "layers.0.mlp.shared_experts"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {**moe_dim_sizes(model), **deltanet.dim_sizes(model)}


def prepare(model: StandardModel) -> None:
    deltanet.prepare(model, hf)
