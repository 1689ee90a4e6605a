"""DeepSeek-V2 (DeepseekV2ForCausalLM, model_type deepseek_v2): latent attention, dense then a softmax mixture.

The block is pre-norm, Llama's shape, and its attention V3's **multi-head latent attention**
(`nncanon.parts.attention.latent`): keys and values are rebuilt per head by ``kv_b_proj`` from one normed latent,
``kv_latent`` (what the cache holds), beside a rotary key part shared by every head; the queries come from a
latent of their own (``query_latent``, DeepSeek-V2's ``q_lora_rank``) or, on DeepSeek-V2-Lite (no
``q_lora_rank``), straight from ``q_proj``. The rotary is handed to the attention as complex frequencies and
turns adjacent pairs of the rope part; the YaRN ``mscale_all_dim`` enters the attention scale.

The first ``first_k_dense_replace`` blocks have a dense SwiGLU MLP (kind ``dense``); the rest a mixture (kind
``mixture``): the router (native name ``gate``) scores the experts by a softmax of its logits (not V3's sigmoid),
keeps the ``num_experts_per_tok`` best (``topk_method`` greedy, V2-Lite) or the best within the ``topk_group``
groups whose best score is highest (group_limited_greedy, DeepSeek-V2), and weights each chosen expert by its
score times ``routed_scaling_factor``, never renormalised (``GROUP_LIMITED_ROUTING`` in
`nncanon.parts.blocks.mixture`). The shared experts (an MLP ``moe_intermediate_size · n_shared_experts`` wide) read
the same input and are added ungated.
"""

from __future__ import annotations

import sys

from transformers.models.deepseek_v2 import modeling_deepseek_v2 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.latent import DirectQueryLatentAttention, LatentAttention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, TEXT_PATHS, nothing_to_prepare, text_only
from ..parts.blocks.mixture import (
    GROUP_LIMITED_ROUTING,
    MOE_RELATIONS,
    SHARED_INPUT_RELATION,
    UNGATED_SHARED_RELATION,
    MoEBlock,
)
from ..parts.blocks.mlp import MLP
from . import deepseek_v3 as v3

FAMILY = "deepseek_v2"
MODEL_TYPES = ("deepseek_v2",)
RENAME = v3.RENAME

#: V3's mixture with an ungated shared expert, routed by V2's softmax (greedy or group-limited) router
LimitedMoE = host("LimitedMoE", v3.GroupedMoE, RELATIONS=(
    GROUP_LIMITED_ROUTING, MOE_RELATIONS[1], UNGATED_SHARED_RELATION, SHARED_INPUT_RELATION))

ENVOYS = {hf.DeepseekV2DecoderLayer: MoEBlock, hf.DeepseekV2Attention: LatentAttention, hf.DeepseekV2Moe: LimitedMoE,
          hf.DeepseekV2MLP: MLP}


def layout_envoys(config) -> dict:
    """No query latent (no q_lora_rank, DeepSeek-V2-Lite): the attention whose queries come from q_proj."""
    return {} if config.q_lora_rank is not None else {hf.DeepseekV2Attention: DirectQueryLatentAttention}


ROOT = host("DeepseekV2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.DeepseekV2ForCausalLM)
prepare = nothing_to_prepare
layer_types = v3.layer_types
qk_head_dim = v3.qk_head_dim
head_dim = v3.head_dim
dim_sizes = v3.dim_sizes


def required_paths(model: StandardModel) -> list[str]:
    last = model.text_config.num_hidden_layers - 1
    return [*TEXT_PATHS, "layers.0.self_attn.kv_a_layernorm", "layers.0.self_attn.kv_b_proj",
            f"layers.{last}.mlp.router", f"layers.{last}.mlp.experts", f"layers.{last}.mlp.shared_experts"]
