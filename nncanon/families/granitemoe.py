"""Granite MoE (GraniteMoeForCausalLM, model_type granitemoe): IBM's Granite 3.0/3.1 mixture models, Granite's µP
block around a mixture of experts.

Every block is RMSNorm -> attention -> add residual_multiplier times its output, RMSNorm -> mixture -> add
residual_multiplier times its output, as on granite (nncanon.families.granite: embedding_multiplier scales the
embedding, attention_multiplier is the softmax scale, the logits are lm_head's divided by logits_scaling). The MLP,
native ``block_sparse_moe`` (served as ``mlp``), is Granite 4.0-H's mixture without its shared expert
(nncanon.parts.blocks.granite_shared's GraniteMoE): the router softmaxes the top-k logits, and the fused SwiGLU
experts (``input_linear``, ``output_linear``) add up their weighted outputs. Written by
``python -m generator new granitemoe --like granite``: granite's block, attention and root, granite_shared's
mixture, no relation of its own.
"""

from __future__ import annotations

import sys

from transformers.models.granitemoe import modeling_granitemoe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import (
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.granite_shared import GraniteMoE
from .granite import ROOT as GRANITE_ROOT
from .granite import GraniteAttention, GraniteBlock
from .granite import past_the_head as past_the_head

FAMILY = "granitemoe"
MODEL_TYPES = ("granitemoe",)
RENAME = {**TEXT_RENAME, "block_sparse_moe": "mlp"}
#: granite's block, its MLP a mixture (the block tracks the tokens the router sends, as MoEBlock does)
GraniteMoeBlock = host("GraniteMoeBlock", GraniteBlock, TRACKS_TOKENS=True)
ENVOYS = {hf.GraniteMoeDecoderLayer: GraniteMoeBlock, hf.GraniteMoeAttention: GraniteAttention,
          hf.GraniteMoeMoE: GraniteMoE}
ROOT = host("GraniteMoeStandardModel", GRANITE_ROOT, family_module=sys.modules[__name__])

build = text_only(hf.GraniteMoeForCausalLM)
layer_types = attention_layer_types  # GraniteMoeConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    """GraniteMoeConfig names its experts num_local_experts (no num_experts alias, unlike Mixtral's)."""
    config = model.text_config
    return {"num_experts": config.num_local_experts, "top_k": config.num_experts_per_tok}
