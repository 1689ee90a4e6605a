"""Doge (DogeForCausalLM, model_type doge): SmallDoge's models, Llama's block with dynamic mask attention and learned
residual gains.

The block norms each sublayer's input with an RMSNorm, as Llama's does, but scales the residual stream it adds to by
a learned vector of its own: ``layer_mid == input_residual · layer_input + self_attn.attention_output`` and
``layer_output == post_attention_residual · layer_mid + mlp.mlp_output`` (elementwise, one gain per channel). The
attention norms its query and key heads (RMSNorm with a weight) before the rotary, and its scores get a dynamic
mask in place of the causal one (`nncanon.parts.attention.dynamic_mask`): a bias per key and key/value head,
``exp(A · softplus(dt_proj(values)))``, where the causal mask allows the key. The MLP is SwiGLU; the Cross Domain
Mixture of Experts (``is_moe``) is not covered: no checkpoint on this page has it.
"""

from __future__ import annotations

import sys

from transformers.models.doge import modeling_doge as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import relation
from ..parts.attention.dynamic_mask import DynamicMaskAttention
from ..parts.blocks.decoder import (
    BLOCK_RELATIONS,
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


@relation("input_residual · layer_input + self_attn.attention_output == layer_mid (input_residual a learned gain per "
          "channel)", proves="layer_mid self_attn.attention_output", reads="layer_input self_attn.attention_output layer_mid",
          adds=("layer_input", "self_attn.attention_output", "layer_mid"))
def _gained_attention_add(host, r):
    gain = host._module.input_residual.double()
    return [(gain * r["layer_input"].double() + r["self_attn.attention_output"].double(), r["layer_mid"])]


@relation("post_attention_residual · layer_mid + mlp.mlp_output == layer_output (post_attention_residual a learned "
          "gain per channel)", proves="layer_output mlp.mlp_output", reads="layer_mid mlp.mlp_output layer_output",
          adds=("layer_mid", "mlp.mlp_output", "layer_output"))
def _gained_mlp_add(host, r):
    gain = host._module.post_attention_residual.double()
    return [(gain * r["layer_mid"].double() + r["mlp.mlp_output"].double(), r["layer_output"])]


_BLOCK_KEPT = tuple(r for r in BLOCK_RELATIONS if " == layer_mid" not in r.text and " == layer_output" not in r.text)
GainedResidualBlock = host("GainedResidualBlock", Block, RELATIONS=(_gained_attention_add, _gained_mlp_add, *_BLOCK_KEPT))

FAMILY = "doge"
MODEL_TYPES = ("doge",)
RENAME = TEXT_RENAME
ENVOYS = {hf.DogeDecoderLayer: GainedResidualBlock, hf.DogeAttention: DynamicMaskAttention, hf.DogeMLP: MLP}
ROOT = host("DogeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.DogeForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
required_paths = text_paths
dim_sizes = intermediate_dims
