"""BitNet b1.58 (BitNetForCausalLM, model_type bitnet): Microsoft's BitNet b1.58 2B4T, Llama's block with a norm
before each output projection.

Every block is RMSNorm -> attention -> add, RMSNorm -> gated MLP (ReLU², relu2) -> add, and returns a tensor; the
attention is grouped-query with the rotary embedding on every dimension. What differs is inside both sublayers: the
attention's heads, side by side, are RMS-normed by ``attn_sub_norm`` before ``o_proj``, and the MLP's
``act(gate) · up`` by ``ffn_sub_norm`` before ``down_proj`` (the shared ``nncanon.parts.blocks.sub_norm`` hosts), so
``attention_premix`` and ``mlp_neurons`` are the normed tensors. The published weights are ternary (1.58 bits) and
load through a quantizer; the tiny checkpoint's are plain float32 ``nn.Linear`` weights, which is what
transformers' class builds without a quantization config. The module was written by
``python -m generator new bitnet --from-survey --like llama``: the two links the survey found broken are the sub-norms.
"""


from __future__ import annotations

import sys

from transformers.models.bitnet import modeling_bitnet as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.sub_norm import SubNormAttention, SubNormMLP
from ..parts.blocks.text_family import intermediate_dims, text_paths

FAMILY = "bitnet"
MODEL_TYPES = ("bitnet",)
RENAME = TEXT_RENAME
ENVOYS = {hf.BitNetDecoderLayer: Block, hf.BitNetAttention: SubNormAttention, hf.BitNetMLP: SubNormMLP}
ROOT = host("BitNetStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.BitNetForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
