"""ERNIE 4.5, dense (Ernie4_5ForCausalLM, model_type ernie4_5): Baidu's ERNIE-4.5-0.3B, Llama's pre-norm block.

Every block is RMSNorm -> attention -> add, RMSNorm -> gated MLP (silu) -> add, and returns a tensor; the
attention is grouped-query (16 query heads over 2 key/value heads on 0.3B). Its rotary embedding turns adjacent
pairs of each head's dimensions (its rotate_half interleaves), not the two halves Llama turns: that changes the
queries and keys, not where any value is read. No projection has a bias (use_bias), and lm_head is tied to
embed_tokens. Every host is the shared one of nncanon.parts, unchanged; the module was written by
``python -m generator new ernie4_5 --from-survey --like llama``, on which every generic relation held.
"""


from __future__ import annotations

import sys

from transformers.models.ernie4_5 import modeling_ernie4_5 as hf

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

FAMILY = "ernie4_5"
MODEL_TYPES = ("ernie4_5",)
RENAME = TEXT_RENAME  # the module paths the survey found on ernie4_5's tree
ENVOYS = {hf.Ernie4_5DecoderLayer: Block, hf.Ernie4_5Attention: Attention, hf.Ernie4_5MLP: MLP}
ROOT = host("Ernie45StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Ernie4_5ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
