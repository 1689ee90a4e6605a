"""FlexOlmo (FlexOlmoForCausalLM, model_type flex_olmo): AllenAI's FlexOlmo, OLMo 2's post-norm block around a mixture
of experts.

The block is OLMo 2's (nncanon.families.olmo2): no norm before a sublayer; each sublayer reads the stream, its output
is RMS-normed (post_attention_layernorm, post_feedforward_layernorm) and added. The attention is OLMo 2's too: q_proj's
and k_proj's whole outputs are RMS-normed as one vector each (q_norm, k_norm) before the heads are split and rotated.
The MLP of every block is OLMoE's mixture (nncanon.parts.blocks.mixture's MoE host): a router (native name gate) gives
each token one logit per expert, a softmax picks the num_experts_per_tok largest and, with norm_topk_prob false, those
probabilities are the expert weights as they are; the fused SwiGLU experts add up their weighted outputs. FlexOlmo's
experts were trained apart, each on its own data, from one shared public expert; that is a training recipe, not a
module. Written by ``python -m generator new flex_olmo --like olmoe`` (the survey cannot mount Llama's block on a block
with no input_layernorm): OLMo 2's block and attention, OLMoE's mixture, no relation of its own.
"""

from __future__ import annotations

import sys

from transformers.models.flex_olmo import modeling_flex_olmo as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import MoE, moe_dim_sizes
from .olmo2 import PostNormAttention, PostNormBlock
from .olmo2 import required_paths as post_norm_paths

FAMILY = "flex_olmo"
MODEL_TYPES = ("flex_olmo",)
RENAME = {**TEXT_RENAME, "gate": "router"}
#: OLMo 2's post-norm block, its MLP a mixture (the block tracks the tokens the router sends, as MoEBlock does)
PostNormMoEBlock = host("PostNormMoEBlock", PostNormBlock, TRACKS_TOKENS=True)
ENVOYS = {hf.FlexOlmoDecoderLayer: PostNormMoEBlock, hf.FlexOlmoAttention: PostNormAttention,
          hf.FlexOlmoSparseMoeBlock: MoE}
ROOT = host("FlexOlmoStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.FlexOlmoForCausalLM)
layer_types = attention_layer_types  # FlexOlmoConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare
dim_sizes = moe_dim_sizes


def required_paths(model: StandardModel) -> list[str]:
    return [*post_norm_paths(model), "layers.0.mlp.router", "layers.0.mlp.experts"]
