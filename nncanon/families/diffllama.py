"""DiffLlama (DiffLlamaForCausalLM, model_type diffllama): Llama's block with differential attention.

The block is Llama's (RMSNorm -> attention -> add, RMSNorm -> SwiGLU MLP -> add); the attention is the differential
attention of Ye et al. 2024 (`nncanon.parts.attention.differential`): the same queries and keys attend twice, over
the two halves of the value heads, each query head's two outputs are joined into one twice a head wide, and the
heads are paired, the second of each pair scaled by a learned λ (its block's ``lambda_q1``, ``lambda_k1``,
``lambda_q2``, ``lambda_k2`` and ``lambda_init = 0.8 - 0.6 · exp(-0.3 · layer)``) and subtracted from the first.
Each difference is RMS-normed with no weight and scaled by ``1 - lambda_init`` before o_proj. So
``attention_head_outputs`` is ``[batch, seq, heads, 2 · head_dim]``, ``attention_premix`` holds heads/2 differences
of 2 · head_dim (viewed, as o_proj reads it, as heads of head_dim), and ``attention_values`` every key/value head
before the split.
"""

from __future__ import annotations

import sys

from transformers.models.diffllama import modeling_diffllama as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.differential import DifferentialAttention, paired_dims
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.text_family import intermediate_dims, text_paths

FAMILY = "diffllama"
MODEL_TYPES = ("diffllama",)
RENAME = TEXT_RENAME
ENVOYS = {hf.DiffLlamaDecoderLayer: Block, hf.DiffLlamaAttention: DifferentialAttention, hf.DiffLlamaMLP: MLP}
ROOT = host("DiffLlamaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.DiffLlamaForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {**intermediate_dims(model), **paired_dims(model)}
