"""EXAONE MoE (ExaoneMoeForCausalLM, model_type exaone_moe): LG AI Research's K-EXAONE, EXAONE 4's attention in a
pre-norm block over DeepSeek-V3's mixture, a dense first block.

Unlike EXAONE 4 (nncanon.families.exaone4), whose block norms each sublayer's output, the block is Llama's:
RMSNorm -> attention -> add, RMSNorm -> MLP -> add. The attention is EXAONE 4's (its host, ``hybrid_attention``):
each query and key head RMS-normed by itself (q_norm, k_norm over head_dim), rotated on ``sliding_attention`` blocks
only, where the call gets ``sliding_window``; every fourth block (``sliding_window_pattern`` "LLLG" or 4) is
``full_attention``, with no rotary at all (global NoPE) over the whole prefix. The MLP is a dense SwiGLU on the
blocks ``mlp_layer_types`` calls ``dense`` (the first first_k_dense_replace) and DeepSeek-V3's mixture on the
``sparse`` ones (nncanon.families.deepseek_v3's GroupedMoE): the router (native ``gate``) scores every expert by the
sigmoid of its float32 logit, picks the top k of those scores plus e_score_correction_bias within the best
topk_group of n_group groups, and weights the chosen experts by their scores, renormalised when norm_topk_prob and
times routed_scaling_factor; the shared experts (one SwiGLU MLP num_shared_experts · moe_intermediate_size wide)
read the same rows and are added ungated. A block's kind names both: its attention (``sliding``, ``full``) and its
MLP (``dense``, ``mixture``). No relation is the family's own. The multi-token-prediction block of the released
checkpoint is not loaded (transformers ignores its weights).
"""

from __future__ import annotations

import sys

from transformers.models.exaone_moe import modeling_exaone_moe as hf

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
from ..parts.blocks.mixture import MoEBlock, attention_and_mlp_kinds, expert_dims
from ..parts.blocks.mlp import MLP
from .deepseek_v3 import GroupedMoE
from .exaone4 import hybrid_attention

FAMILY = "exaone_moe"
MODEL_TYPES = ("exaone_moe",)
RENAME = {**TEXT_RENAME, "gate": "router"}

ExaoneMoeAttention = hybrid_attention("ExaoneMoeAttention", Attention, hf.apply_rotary_pos_emb)

ENVOYS = {hf.ExaoneMoeDecoderLayer: MoEBlock, hf.ExaoneMoeAttention: ExaoneMoeAttention,
          hf.ExaoneMoeSparseMoEBlock: GroupedMoE, hf.ExaoneMoeMLP: MLP}
ROOT = host("ExaoneMoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.ExaoneMoeForCausalLM)
prepare = nothing_to_prepare

def layer_types(model) -> list[str]:
    """``<attention>_<mlp>`` per block: ``sliding`` or ``full`` from config.layer_types, ``dense`` or ``mixture``
    from config.mlp_layer_types (the two patterns are independent: the dense first block is a sliding one)."""
    config = model.text_config
    return attention_and_mlp_kinds(config.layer_types, [kind == "sparse" for kind in config.mlp_layer_types])


dim_sizes = expert_dims()


def required_paths(model: StandardModel) -> list[str]:
    last = model.text_config.num_hidden_layers - 1
    return [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm", f"layers.{last}.mlp.router",
            f"layers.{last}.mlp.experts", f"layers.{last}.mlp.shared_experts"]
