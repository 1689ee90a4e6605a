"""IQuest-Coder (model_type iquestcoder, built as LlamaForCausalLM): IQuest Research's code models, Llama's block.

transformers has no modeling code of IQuest-Coder's own: its config class, ``IQuestCoderConfig``, is a
``LlamaConfig`` built as ``LlamaForCausalLM``, so every host is Llama's and the shared one of nncanon.parts,
unchanged; nncanon loads the checkpoint's config as IQuestCoderConfig (`nncanon.parts.loading.borrowed_config_class`).
The checkpoints' remote modeling file adds two switches over Llama, ``clip_qkv`` (queries, keys and values clamped)
and a Qwen2-style sliding window from ``max_window_layers`` on; every published checkpoint has both off, and
IQuestCoderConfig refuses a config that turns either on, so no block here clamps or windows. Every block is
RMSNorm -> grouped-query attention -> add, RMSNorm -> SwiGLU MLP -> add.
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

# Relations still to state: what the survey of iquestcoder found broken on the generic parts
# (python -m generator survey; verify names each that still does not hold): none
FAMILY = 'iquestcoder'
MODEL_TYPES = ('iquestcoder',)
RENAME = TEXT_RENAME  # the module paths the survey found on iquestcoder's tree
ENVOYS = {hf.LlamaDecoderLayer: Block, hf.LlamaAttention: Attention, hf.LlamaMLP: MLP}
ROOT = host("IQuestCoderStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.LlamaForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
