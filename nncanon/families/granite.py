"""Granite (GraniteForCausalLM, model_type granite): Llama's block with four µP multipliers.

Module for module the tree is Llama's: RMSNorm, grouped-query attention with the rotary embedding
on every dimension, an add, RMSNorm, a SwiGLU MLP, an add, a final RMSNorm and lm_head (tied to
embed_tokens on the released 3.x checkpoints). What differs are four scalars of the config, each
applied in the forward, none of them a module or a parameter:

- ``embedding_multiplier``: GraniteModel multiplies embed_tokens' output by it before the first
  block, so ``token_embeddings`` (embed_tokens' output) is unscaled and
  ``layers[0].layer_input == token_embeddings · embedding_multiplier``.
- ``attention_multiplier``: the attention's softmax scale (``self_attn.scaling``), in place of
  1/sqrt(head_dim); the shared attention relations read the module's own scaling, so they hold as
  they are.
- ``residual_multiplier``: GraniteDecoderLayer scales each branch before adding it,
  ``layer_mid == layer_input + residual_multiplier · self_attn.attention_output`` and
  ``layer_output == layer_mid + residual_multiplier · mlp.mlp_output``. ``attention_output`` and
  ``mlp_output`` are what the modules return (o_proj's and down_proj's outputs), before the scale:
  what the residual stream gains is residual_multiplier times them.
- ``logits_scaling``: GraniteForCausalLM divides lm_head's output by it, so
  ``logits == lm_head_output / logits_scaling``.

The block, root and attention/MLP hosts state these relations in place of the shared ones; every
value is read where Llama's is.
"""

from __future__ import annotations

import sys

from transformers.models.granite import modeling_granite as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import own
from ..core.model import StandardModel
from ..core.relations import relation
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.scaled import BLOCK_KEPT, scaled_adds

# -- the root: the embedding and logits multipliers --------------------------------------------


@relation("layers[0].layer_input == token_embeddings · embedding_multiplier", proves="token_embeddings",
          reads="token_embeddings layers[0].layer_input")
def _scaled_embeddings(host, r):
    return [(r["token_embeddings"] * host._module.config.embedding_multiplier, r["layers[0].layer_input"])]


@relation("logits == lm_head_output / logits_scaling", proves="logits", reads="lm_head_output logits")
def _scaled_logits(host, r):
    return [(r["lm_head_output"] / host._module.config.logits_scaling, r["logits"])]


_ROOT_KEPT = tuple(r for r in ROOT_RELATIONS
                   if r.text not in ("layers[0].layer_input == token_embeddings",
                                     "logits == lm_head_output (nothing past the head)"))
GRANITE_ROOT_RELATIONS = (_scaled_embeddings, _scaled_logits, *_ROOT_KEPT)

# -- the block: the residual multiplier on both branches (the shared scaled adds) ----------------------

GraniteBlock = host("GraniteBlock", Block, RELATIONS=(
    *scaled_adds("residual_multiplier", lambda block: block.residual_multiplier), *BLOCK_KEPT))

GraniteAttention = host("GraniteAttention", Attention, values=[
    Value("attention_output", Residual,
          "The attention's output (o_proj's); the block adds residual_multiplier times it to the residual stream",
          own("output", element=0)),
])

GraniteMLP = host("GraniteMLP", MLP, values=[
    Value("mlp_output", Residual,
          "The MLP's output (down_proj's); the block adds residual_multiplier times it to the residual stream",
          own("output")),
])

FAMILY = "granite"
MODEL_TYPES = ("granite",)
RENAME = TEXT_RENAME
ENVOYS = {hf.GraniteDecoderLayer: GraniteBlock, hf.GraniteAttention: GraniteAttention, hf.GraniteMLP: GraniteMLP}
ROOT = host("GraniteStandardModel", StandardModel, values=[
    *ROOT_VALUES,
    Value("token_embeddings", Residual,
          "The embedding module's output, before embedding_multiplier: layers[0].layer_input is it times the multiplier",
          ROOT_VALUES[1].locator),
    Value("logits", ROOT_VALUES[0].layout,
          "The logits the model returns: lm_head_output divided by logits_scaling", ROOT_VALUES[0].locator),
], RELATIONS=GRANITE_ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.GraniteForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): GraniteForCausalLM divides by logits_scaling."""
    return logits / model._module.config.logits_scaling


def required_paths(model: StandardModel) -> list[str]:
    return TEXT_PATHS


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
