"""MiniMax-M2 (MiniMaxM2ForCausalLM, model_type minimax_m2): MiniMax's M2 line, Llama's block with a mixture on
every block, routed by sigmoid scores whose choice a per-expert bias moves, and no shared expert.

Every block is RMSNorm -> attention -> add, RMSNorm -> mixture -> add. The attention RMS-normalizes q_proj's and
k_proj's whole outputs, every head at once (q_norm, k_norm, as OLMo 2's), then rotates only the first ``rotary_dim``
dimensions of each head (a partial rotary: 64 of 128 on the released checkpoints, transformers' partial_rotary_factor
0.5). The mixture's router (native ``gate``, a bare weight) scores every expert by the sigmoid of its logit; the
choice adds the mixture's ``e_score_correction_bias`` (a buffer the mixture hands the router), and the chosen
experts' plain scores, renormalised over them, weight their outputs (nncanon.parts.blocks.mixture's
``biased_sigmoid_routing``, unscaled). The released checkpoints' multi-token-prediction modules are not part of
transformers' class.
"""

from __future__ import annotations

import sys

from transformers.models.minimax_m2 import modeling_minimax_m2 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import MOE_RELATIONS, MoE, MoEBlock, biased_sigmoid_routing, expert_dims

FAMILY = "minimax_m2"
MODEL_TYPES = ("minimax_m2",)
RENAME = {**TEXT_RENAME, "gate": "router"}

BiasedMoE = host("BiasedMoE", MoE, RELATIONS=(biased_sigmoid_routing("e_score_correction_bias"), *MOE_RELATIONS[1:]))

ENVOYS = {hf.MiniMaxM2DecoderLayer: MoEBlock, hf.MiniMaxM2Attention: Attention, hf.MiniMaxM2SparseMoeBlock: BiasedMoE}
ROOT = host("MiniMaxM2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.MiniMaxM2ForCausalLM)
layer_types = attention_layer_types  # MiniMaxM2Config has no layer_types: every block full attention and a mixture
prepare = nothing_to_prepare


dim_sizes = expert_dims("num_local_experts")


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm", "layers.0.mlp.router",
            "layers.0.mlp.experts"]
