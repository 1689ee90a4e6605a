"""Phi-3 (Phi3ForCausalLM, model_type phi3): Llama's block with fused projections and a sliding window.

The block is Llama's (RMSNorm -> attention -> add, RMSNorm -> gated MLP -> add, untied head); its
residual dropouts are the identity at inference. Two projections are fused into one Linear each:

- ``self_attn.qkv_proj`` computes queries, keys and values in one matmul; Phi3Attention slices its
  output at num_heads·head_dim and num_heads·head_dim + num_kv_heads·head_dim, views the three parts
  as heads and rotates the queries and keys. ``attention_queries``, ``attention_keys`` and
  ``attention_values`` are read where the attention function is called, so they are already split,
  rotated and in heads, as Llama's; there is no q_proj, k_proj or v_proj module to hook.
- ``mlp.gate_up_proj`` computes the gate and the up projection in one matmul; Phi3MLP chunks its
  output in two halves along the last dimension, gate first, and computes ``up · activation_fn(gate)``.
  ``mlp_activation`` is ``activation_fn``'s output (the activated gate half) and ``mlp_neurons``
  what ``down_proj`` receives (the up half times it). Phi-3's MLP host (the shared fused gated MLP,
  `nncanon.parts.blocks.mlp`) states this with gate_up_proj's chunks, in place of the shared
  ``act_fn(gate_proj(input))``.

Phi3Attention passes config.sliding_window to the attention function (2047 on
Phi-3-mini-4k-instruct), and Phi3Model builds the banded mask from it, so the attention host states
the windowed relations of Mistral's (a query sees the last sliding_window keys, itself included).
The blocks are sliding_attention when the config sets a window and full_attention when it does not.
"""

from __future__ import annotations

import sys

from transformers.models.phi3 import modeling_phi3 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import FusedGatedMLP
from ..research.weights import stacked_qkv
from .mistral import MistralAttention
from .mistral import layer_types as layer_types  # one window serves every block, as on Mistral

# -- the attention: Mistral's windowed relations over the fused qkv_proj's split ----------------

Phi3Attention = host("Phi3Attention", MistralAttention, WEIGHTS=stacked_qkv("qkv_proj"))

# -- the MLP: gate and up are the two halves of gate_up_proj (the shared fused gated MLP) ----------------------

Phi3MLP = host("Phi3MLP", FusedGatedMLP)

FAMILY = "phi3"
MODEL_TYPES = ("phi3",)
RENAME = TEXT_RENAME
ENVOYS = {hf.Phi3DecoderLayer: Block, hf.Phi3Attention: Phi3Attention, hf.Phi3MLP: Phi3MLP}
ROOT = host("Phi3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Phi3ForCausalLM)
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return TEXT_PATHS


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
