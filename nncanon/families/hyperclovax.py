"""HyperCLOVA X (HyperCLOVAXForCausalLM, model_type hyperclovax): NAVER Cloud's HyperCLOVA X SEED Think, Granite's
µP multipliers around a Peri-LN block.

Module for module the tree is Granite's (nncanon.families.granite) with two RMSNorms more per block: ``post_norm1``
norms the attention's output and ``post_norm2`` the MLP's (Peri-Layer Normalization, ``use_post_norm``), so what a
sublayer adds to the stream is its post-norm's output, as on the sandwich block of Gemma 2 and GLM-4
(nncanon.parts.blocks.sandwich), times ``residual_multiplier``:
``layer_mid == layer_input + residual_multiplier · post_norm1(self_attn(input_layernorm(layer_input)))``. As on
granite, ``embedding_multiplier`` scales the embedding before the first block and ``attention_multiplier`` is the
softmax scale (``head_dim ** -0.5`` when the config leaves it None); unlike granite, the model MULTIPLIES lm_head's
output by ``logits_scaling``: ``logits == lm_head_output · logits_scaling``. A config with ``use_post_norm`` false
(nn.Identity in place of the two post-norms) is refused: this family covers the Peri-LN checkpoints.
"""

from __future__ import annotations

import sys

from transformers.models.hyperclovax import modeling_hyperclovax as hf

from ..core.hosts import host
from ..core.model import FamilyMismatch, StandardModel
from ..core.relations import relation
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.sandwich import weight_gain_block
from ..parts.blocks.text_family import intermediate_dims
from .granite import GRANITE_ROOT_RELATIONS
from .granite import ROOT as GRANITE_ROOT

FAMILY = "hyperclovax"
MODEL_TYPES = ("hyperclovax",)
RENAME = TEXT_RENAME
#: the norms past input_layernorm: the attention's post-norm, the MLP's pre-norm (Llama's name for it), the MLP's
#: post-norm
NORMS = ("post_norm1", "post_attention_layernorm", "post_norm2")
PeriLNBlock = weight_gain_block("HyperCLOVAXPeriLNBlock", NORMS, scale="residual_multiplier")


@relation("logits == lm_head_output · logits_scaling", proves="logits", reads="lm_head_output logits")
def _multiplied_logits(host, r):
    return [(r["lm_head_output"] * host._module.config.logits_scaling, r["logits"])]


_GRANITE_KEPT = tuple(r for r in GRANITE_ROOT_RELATIONS if r.text != "logits == lm_head_output / logits_scaling")

ENVOYS = {hf.HyperCLOVAXDecoderLayer: PeriLNBlock, hf.HyperCLOVAXAttention: Attention, hf.HyperCLOVAXMLP: MLP}
ROOT = host("HyperCLOVAXStandardModel", GRANITE_ROOT, values=[
    Value("logits", ROOT_VALUES[0].layout,
          "The logits the model returns: lm_head_output times logits_scaling", ROOT_VALUES[0].locator),
], RELATIONS=(_multiplied_logits, *_GRANITE_KEPT), family_module=sys.modules[__name__])

build = text_only(hf.HyperCLOVAXForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
dim_sizes = intermediate_dims


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): HyperCLOVAXForCausalLM multiplies by logits_scaling."""
    return logits * model._module.config.logits_scaling


def required_paths(model: StandardModel) -> list[str]:
    if not model.text_config.use_post_norm:
        raise FamilyMismatch(f"{FAMILY}: use_post_norm is false (no post-norms: granite's block with the logits "
                             "multiplied); nncanon serves the Peri-LN checkpoints under this family")
    return [*TEXT_PATHS, "layers.0.post_norm1", "layers.0.post_norm2"]
