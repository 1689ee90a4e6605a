"""CWM (CwmForCausalLM, model_type cwm): Meta FAIR's Code World Model, Llama 3's block with interleaved attention
reach.

Every block is RMSNorm -> attention -> add, RMSNorm -> SwiGLU MLP -> add, and returns a tensor; the attention is
grouped-query with Llama 3's scaled rotary. config.layer_types names each block full_attention or sliding_attention
(by default the first of every four full, the other three windowed), and each attention module carries its own
sliding_window (None on a full block), which the shared attention relations read from it: Ministral's pattern on
Llama 3's block. Every host is the shared one of nncanon.parts, unchanged; the module was written by
``python -m generator new cwm --from-survey``, on which every generic relation held.
"""


from __future__ import annotations

import sys

from transformers.models.cwm import modeling_cwm as hf

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

# Relations still to state: what the survey of cwm found broken on the generic parts
# (python -m generator survey; verify names each that still does not hold): none
FAMILY = "cwm"
MODEL_TYPES = ("cwm",)
RENAME = TEXT_RENAME  # the module paths the survey found on cwm's tree
ENVOYS = {hf.CwmDecoderLayer: Block, hf.CwmAttention: Attention, hf.CwmMLP: MLP}
ROOT = host("CwmStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.CwmForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
