"""Helium (HeliumForCausalLM, model_type helium): Kyutai's Helium-1, Llama's pre-norm block on classes of its own.

Every block is RMSNorm -> attention -> add, RMSNorm -> gated MLP (silu) -> add, and returns a tensor. The
published 2B checkpoint has as many key/value heads as query heads (multi-head attention), a vocabulary of
48,000 and an RMSNorm epsilon of 1e-8. Its rotary embedding turns adjacent pairs of each head's dimensions
(its rotate_half interleaves), not the two halves Llama turns: that changes the queries and keys, not where
any value is read. Every host is the shared one of nncanon.parts, unchanged; the module was written by
``python -m generator new helium --from-survey``, on which every generic relation held.
"""


from __future__ import annotations

import sys

from transformers.models.helium import modeling_helium as hf

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

# Relations still to state: what the survey of helium found broken on the generic parts (python -m generator survey; verify names each that still does not hold): none
FAMILY = "helium"
MODEL_TYPES = ("helium",)
RENAME = TEXT_RENAME  # the module paths the survey found on helium's tree
ENVOYS = {hf.HeliumDecoderLayer: Block, hf.HeliumAttention: Attention, hf.HeliumMLP: MLP}
ROOT = host("HeliumStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.HeliumForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
