"""Llama (LlamaForCausalLM, model_type llama): the plain pre-norm decoder the other families extend.

Every block is RMSNorm -> attention -> add, RMSNorm -> gated MLP -> add, and returns a tensor;
the attention is grouped-query with the rotary embedding on every dimension of every head, and
nothing in it has a norm or a gate of its own. Llama 3.1 and 3.2 scale the rotary frequencies
("llama3" rope), which changes the cos/sin tables, not where any value is read. The small
Llama 3.2 checkpoints tie lm_head to embed_tokens. Every host is the shared one of
nncanon.parts, unchanged: this family is what those hosts were written for.
"""

from __future__ import annotations

import sys

from transformers.models.llama import modeling_llama as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
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

FAMILY = "llama"
MODEL_TYPES = ("llama",)
RENAME = TEXT_RENAME
ENVOYS = {hf.LlamaDecoderLayer: Block, hf.LlamaAttention: Attention, hf.LlamaMLP: MLP}
ROOT = host("LlamaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.LlamaForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
