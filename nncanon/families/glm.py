"""GLM (GlmForCausalLM, model_type glm): Zhipu AI's GLM-4-9B as transformers exports it, Llama's pre-norm block
with Phi-3's fused MLP.

Every block is RMSNorm -> attention -> add, RMSNorm -> gated MLP (silu) -> add, and returns a tensor. q_proj,
k_proj and v_proj carry a bias, o_proj none; the attention is grouped-query (32 query heads over 2 key/value
heads on 9B) and its rotary embedding turns only half of each head (partial_rotary_factor 0.5), in adjacent pairs.
The MLP's gate and up projections are one gate_up_proj whose two halves the forward chunks, gate first, with the
activation at activation_fn: Phi-3's MLP host (nncanon.families.phi3). The module was written by
``python -m generator new glm --from-survey``; the one relation the survey found broken, the gated MLP's
(there is no gate_proj), is Phi-3's fused one here.
"""


from __future__ import annotations

import sys

from transformers.models.glm import modeling_glm as hf

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
from ..parts.blocks.text_family import intermediate_dims, text_paths
from .phi3 import Phi3MLP

FAMILY = "glm"
MODEL_TYPES = ("glm",)
RENAME = TEXT_RENAME  # the survey's alias of activation_fn as act_fn is not needed: Phi3MLP reads it by its name
ENVOYS = {hf.GlmDecoderLayer: Block, hf.GlmAttention: Attention, hf.GlmMLP: Phi3MLP}
ROOT = host("GlmStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.GlmForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
