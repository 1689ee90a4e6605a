"""GLM-4.7-Flash (Glm4MoeLiteForCausalLM, model_type glm4_moe_lite): DeepSeek-V3's latent attention over GLM-4.5's
mixture.

The block is pre-norm, Llama's shape. transformers builds its attention as DeepSeek-V3's (``Glm4MoeLiteAttention`` is
``DeepseekV3Attention``), so it is the shared multi-head latent attention (`nncanon.parts.attention.latent`): the
stream is projected down to a normed query latent (``query_latent``, ``q_lora_rank`` wide) and to one normed
key/value latent (``kv_latent``, what the cache holds), each projected back up per head; a query or key head is a
position-free part beside a rotary part, the keys' rotary part one per token shared by every head. Its MLPs are
GLM-4.5's (``Glm4MoeLiteMoE`` is ``Glm4MoeMoE``): the blocks ``mlp_layer_types`` names ``dense`` have a dense SwiGLU
MLP, the ``sparse`` ones DeepSeek-V3's grouped sigmoid mixture (`nncanon.families.deepseek_v3`'s ``GroupedMoE``),
the chosen scores renormalised and scaled by ``routed_scaling_factor``, beside a shared expert added ungated. The
family states no relation of its own: which blocks are mixtures is read from ``mlp_layer_types``, not from
DeepSeek's ``first_k_dense_replace``.
"""

from __future__ import annotations

import sys

from transformers.models.glm4_moe_lite import modeling_glm4_moe_lite as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.latent import LatentAttention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, nothing_to_prepare, text_only
from ..parts.blocks.mixture import MoEBlock
from ..parts.blocks.mlp import MLP
from . import deepseek_v3 as v3

FAMILY = "glm4_moe_lite"
MODEL_TYPES = ("glm4_moe_lite",)
RENAME = v3.RENAME
ENVOYS = {hf.Glm4MoeLiteDecoderLayer: MoEBlock, hf.Glm4MoeLiteAttention: LatentAttention,
          hf.Glm4MoeLiteMoE: v3.GroupedMoE, hf.Glm4MoeLiteMLP: MLP}
ROOT = host("Glm4MoeLiteStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Glm4MoeLiteForCausalLM)
prepare = nothing_to_prepare
qk_head_dim = v3.qk_head_dim
head_dim = v3.head_dim
dim_sizes = v3.dim_sizes
required_paths = v3.required_paths


def layer_types(model) -> list[str]:
    """``dense`` where ``mlp_layer_types`` says dense, ``mixture`` where it says sparse (the decoder layer builds
    its MLP from that list; every block's attention is latent)."""
    return ["dense" if kind == "dense" else "mixture" for kind in model.text_config.mlp_layer_types]
