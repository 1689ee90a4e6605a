"""Cohere 2 (Cohere2ForCausalLM, model_type cohere2): Command R7B / Command A, Cohere's parallel block with
three sliding-window blocks to every full one, and the rotary only on the sliding ones.

The block is Cohere's (nncanon.families.cohere): one LayerNorm (a weight, no bias) whose output both the
attention and the SwiGLU MLP read, their outputs added to the stream in one sum, so ``layer_mid`` is never
served and ``mlp_input`` is ``attention_norm_output``. ``config.layer_types`` makes three blocks in four
``sliding_attention`` (each query sees the last ``sliding_window`` keys, 4096 on the released checkpoints):
those rotate their queries and keys (adjacent pairs, as Cohere's). Every fourth block is ``full_attention``
and has no rotary at all (NoPE): its attention sees content and the causal mask only, over the whole prefix.
The module holds the window and the flag (``sliding_window`` is None on a full block); the relation that
says which blocks rotate is nncanon.parts.attention.nope's. The head is tied and its logits multiplied by
``logit_scale`` (0.25 on Command R7B), as on Cohere.
"""

from __future__ import annotations

import sys

from transformers.models.cohere2 import modeling_cohere2 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.nope import rotary_or_not
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks import decoder
from ..parts.blocks.mlp import MLP
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.text_family import intermediate_dims
from .cohere import ROOT_RELATIONS_COHERE
from .cohere import required_paths as one_norm_paths

FAMILY = "cohere2"
MODEL_TYPES = ("cohere2",)
RENAME = decoder.TEXT_RENAME

SlidingRotaryAttention = host("SlidingRotaryAttention", Attention, RELATIONS=(
    *ATTENTION_RELATIONS, rotary_or_not(hf.apply_rotary_pos_emb, flag="sliding_window",
                                        rotated_on="on sliding_attention blocks (the module has a sliding_window)",
                                        nope_on="on full_attention blocks (NoPE)")))

ENVOYS = {hf.Cohere2DecoderLayer: parallel_block("Cohere 2's block", one_norm=True),
          hf.Cohere2Attention: SlidingRotaryAttention, hf.Cohere2MLP: MLP}
#: Cohere's root: the weight-only LayerNorm final norm by its formula, logits == lm_head_output · logit_scale
ROOT = host("Cohere2StandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=ROOT_RELATIONS_COHERE,
            family_module=sys.modules[__name__])

build = decoder.text_only(hf.Cohere2ForCausalLM)
layer_types = decoder.attention_layer_types  # config.layer_types: sliding_attention three in four
prepare = decoder.nothing_to_prepare
required_paths = one_norm_paths  # Cohere's: no post_attention_layernorm
dim_sizes = intermediate_dims


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): the causal LM multiplies the head's logits by logit_scale."""
    return logits * model._module.logit_scale
