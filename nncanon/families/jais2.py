"""Jais 2 (Jais2ForCausalLM, model_type jais2): Inception's Jais 2, a pre-norm block with LayerNorms, biases and an
MLP with no gate.

Every block is LayerNorm -> attention -> add, LayerNorm -> MLP -> add, and returns a tensor. The attention is Llama's
with a bias on every projection (attention_bias) and the rotary embedding on every dimension; the MLP is
``down_proj(act(up_proj(x)))`` with ReLU² and biases: no gate_proj, so ``mlp_neurons`` is the activation itself (the
shared ``ungated_mlp`` host, as Arcee's). The module was written by
``python -m generator new jais2 --from-survey --like arcee``; the one relation the survey found broken, the gated
MLP's, is the ungated one here.
"""



from __future__ import annotations

import sys

from transformers.models.jais2 import modeling_jais2 as hf

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
from ..parts.blocks.ungated import ungated_mlp

FAMILY = "jais2"
MODEL_TYPES = ("jais2",)
RENAME = TEXT_RENAME
ENVOYS = {hf.Jais2DecoderLayer: Block, hf.Jais2Attention: Attention, hf.Jais2MLP: ungated_mlp("up_proj")}
ROOT = host("Jais2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Jais2ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
