"""SmolLM3 (SmolLM3ForCausalLM, model_type smollm3): Llama's block with no rotary on every fourth block (NoPE).

Every block is Llama's: RMSNorm -> grouped-query attention -> add, RMSNorm -> SwiGLU MLP -> add, and the head
is tied to the embedding. What differs is where the position signal is: ``config.no_rope_layers`` has one
entry per block, 1 where the attention's queries and keys are rotated and 0 where they are not; built from
``no_rope_layer_interval`` (4 on the released checkpoints), blocks 3, 7, 11, ... (0-based) are NoPE. A NoPE
block's attention sees token content and the causal mask only, no position. The page names those blocks
``nope_attention``; the relation that says which blocks rotate is nncanon.parts.attention.nope's. A config may also set
``use_sliding_window`` (off on the released checkpoints), which windows the NoPE blocks only; the module
holds the window, so the shared attention relations read it there.
"""

from __future__ import annotations

import sys

from transformers.models.smollm3 import modeling_smollm3 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.nope import nope_layer_types, rotary_or_not
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks import decoder
from ..parts.blocks.mlp import MLP
from ..parts.blocks.text_family import intermediate_dims, text_paths

FAMILY = "smollm3"
MODEL_TYPES = ("smollm3",)
RENAME = decoder.TEXT_RENAME

NopeAttention = host("NopeAttention", Attention, RELATIONS=(*ATTENTION_RELATIONS, rotary_or_not(hf.apply_rotary_pos_emb)))

ENVOYS = {hf.SmolLM3DecoderLayer: decoder.Block, hf.SmolLM3Attention: NopeAttention, hf.SmolLM3MLP: MLP}
ROOT = host("SmolLM3StandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=decoder.ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = decoder.text_only(hf.SmolLM3ForCausalLM)
layer_types = nope_layer_types
prepare = decoder.nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
