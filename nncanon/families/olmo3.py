"""OLMo 3 (Olmo3ForCausalLM, model_type olmo3): OLMo 2's post-norm block with sliding-window layer types.

The block is OLMo 2's, module for module (nncanon.families.olmo2): no norm before a sublayer, each sublayer
reads the stream itself and what it adds is its output RMS-normed (post_attention_layernorm,
post_feedforward_layernorm); the query and key projections are each RMS-normed as one vector across every
head (q_norm, k_norm). What is OLMo 3's is the attention's reach: ``config.layer_types`` makes three blocks
in four ``sliding_attention`` (each query sees the last ``sliding_window`` keys, 4096 on the released
checkpoints) and every fourth ``full_attention``; the module holds its window, so the shared attention
relations read it there. The rotary tables are per layer type: the long-context checkpoints scale the full
blocks' frequencies with YaRN (``rope_scaling``) and leave the sliding blocks' unscaled.
"""

from __future__ import annotations

import sys

from transformers.models.olmo3 import modeling_olmo3 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks import decoder
from ..parts.blocks.text_family import intermediate_dims
from .olmo2 import PostNormAttention, PostNormBlock, PostNormMLP
from .olmo2 import required_paths as post_norm_paths

FAMILY = "olmo3"
MODEL_TYPES = ("olmo3",)
RENAME = decoder.TEXT_RENAME

ENVOYS = {hf.Olmo3DecoderLayer: PostNormBlock, hf.Olmo3Attention: PostNormAttention, hf.Olmo3MLP: PostNormMLP}
ROOT = host("Olmo3StandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=decoder.ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = decoder.text_only(hf.Olmo3ForCausalLM)
layer_types = decoder.attention_layer_types  # config.layer_types: sliding_attention three in four
prepare = decoder.nothing_to_prepare
#: OLMo 2's: no input_layernorm, a post-feedforward norm, q_norm and k_norm
required_paths = post_norm_paths
dim_sizes = intermediate_dims
