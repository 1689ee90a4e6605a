"""Arcee (ArceeForCausalLM, model_type arcee): Arcee AI's AFM-4.5B, Llama's pre-norm block with an MLP that has no gate.

Every block is RMSNorm -> attention -> add, RMSNorm -> MLP -> add, and returns a tensor; the attention is Llama's,
grouped-query with the rotary embedding on every dimension of every head. The MLP is ``down_proj(act(up_proj(x)))``
with ReLU² as the activation (``relu2``, ``relu(x) ** 2``): no gate_proj, so ``mlp_neurons`` is the activation
itself, as GPT-NeoX's and Phi's are (the shared ``ungated_mlp`` host). The module was written by
``python -m generator new arcee --from-survey --like llama``; the one relation the survey found broken, the gated
MLP's, is the ungated one here.
"""


from __future__ import annotations

import sys

from transformers.models.arcee import modeling_arcee as hf

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

FAMILY = "arcee"
MODEL_TYPES = ("arcee",)
RENAME = TEXT_RENAME  # the module paths the survey found on arcee's tree
ENVOYS = {hf.ArceeDecoderLayer: Block, hf.ArceeAttention: Attention, hf.ArceeMLP: ungated_mlp("up_proj")}
ROOT = host("ArceeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.ArceeForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
