"""Qwen3 dense (Qwen3ForCausalLM, model_type qwen3): Llama's block with query/key norms.

The block, the gated MLP and the hosts are Llama's. The attention differs in one place: each
query and key head is RMS-normed over its head_dim (q_norm, k_norm, gain = weight) before the
rotary embedding, so attention_queries and attention_keys are normed and rotated, and q_proj's
output is neither. head_dim is set by the config (128), not hidden_size / num_heads. A config
may make blocks from max_window_layers on sliding-window (layer_types "sliding_attention"); the
released checkpoints do not.
"""

from __future__ import annotations

import sys

from transformers.models.qwen3 import modeling_qwen3 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block, text_only
from ..parts.blocks.mlp import MLP
from . import llama

FAMILY = "qwen3"
MODEL_TYPES = ("qwen3",)
RENAME = llama.RENAME
ENVOYS = {hf.Qwen3DecoderLayer: Block, hf.Qwen3Attention: Attention, hf.Qwen3MLP: MLP}
ROOT = host("Qwen3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Qwen3ForCausalLM)
layer_types, dim_sizes, prepare = llama.layer_types, llama.dim_sizes, llama.prepare


def required_paths(model: StandardModel) -> list[str]:
    return [*llama.required_paths(model), "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm"]
