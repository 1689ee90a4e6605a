"""GLM-4.5 (Glm4MoeForCausalLM, model_type glm4_moe): Zhipu AI's GLM-4.5 mixture models, a pre-norm block with GLM's
attention and DeepSeek-V3's grouped sigmoid mixture.

Every block is RMSNorm -> attention -> add, RMSNorm -> MLP -> add, and returns a tensor. The attention has separate
q_proj, k_proj and v_proj with biases (attention_bias), grouped-query heads and the rotary embedding on half of each
head (partial_rotary_factor 0.5); use_qk_norm adds per-head q/k RMSNorms (off on GLM-4.5-Air). The first
first_k_dense_replace blocks (``dense``) have a dense SwiGLU MLP; every later block (``mixture``) has DeepSeek-V3's
mixture (nncanon.families.deepseek_v3's GroupedMoE): the router's sigmoid scores plus e_score_correction_bias pick
the top experts within the best groups, the chosen scores renormalised and scaled by routed_scaling_factor, and a
shared expert added ungated. Written by ``python -m generator new glm4_moe --like glm --model-type glm4_moe``
(the survey cannot mount a mixture on the gated MLP's names): Llama's block and attention hosts, DeepSeek-V3's
mixture, no relation of its own.
"""

from __future__ import annotations

import sys

from transformers.models.glm4_moe import modeling_glm4_moe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import MoEBlock
from ..parts.blocks.mlp import MLP
from .deepseek_v3 import GroupedMoE
from .deepseek_v3 import layer_types as layer_types

FAMILY = "glm4_moe"
MODEL_TYPES = ("glm4_moe",)
RENAME = {**TEXT_RENAME, "gate": "router"}
ENVOYS = {hf.Glm4MoeDecoderLayer: MoEBlock, hf.Glm4MoeAttention: Attention, hf.Glm4MoeMoE: GroupedMoE,
          hf.Glm4MoeMLP: MLP}
ROOT = host("Glm4MoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Glm4MoeForCausalLM)
prepare = nothing_to_prepare


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"intermediate_size": config.intermediate_size, "num_experts": config.n_routed_experts,
            "top_k": config.num_experts_per_tok}


def required_paths(model: StandardModel) -> list[str]:
    last = model.text_config.num_hidden_layers - 1
    return [*TEXT_PATHS, f"layers.{last}.mlp.router", f"layers.{last}.mlp.experts", f"layers.{last}.mlp.shared_experts"]
