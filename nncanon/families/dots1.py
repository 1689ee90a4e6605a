"""dots.llm1 (Dots1ForCausalLM, model_type dots1): rednote's dots.llm1, Qwen3's attention over DeepSeek-V3's
mixture, a dense first block.

Every block is RMSNorm -> attention -> add, RMSNorm -> MLP -> add. The attention is Qwen3's: each query and key head
RMS-normed (q_norm, k_norm over head_dim) before the rotary, no biases. The MLP is a dense SwiGLU on the first
first_k_dense_replace blocks (kind ``dense``) and a mixture after (kind ``mixture``), DeepSeek-V3's to the module
(nncanon.families.deepseek_v3's GroupedMoE): the router (native ``gate``) scores every expert by the sigmoid of its
float32 logit, picks the top k of those scores plus e_score_correction_bias within the best topk_group of n_group
groups, and weights the chosen experts by their scores, renormalised when norm_topk_prob and times
routed_scaling_factor; the shared experts (one SwiGLU MLP n_shared_experts · moe_intermediate_size wide) read the
same rows and are added ungated. No relation is the family's own. A config whose layer_types make some attention
sliding-window (sliding_window with max_window_layers below the block count) is refused: the released checkpoint's
blocks all attend in full.
"""

from __future__ import annotations

import sys

from transformers.models.dots1 import modeling_dots1 as hf

from ..core.hosts import host
from ..core.model import FamilyMismatch, StandardModel
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
from .glm4_moe import dim_sizes as dim_sizes

FAMILY = "dots1"
MODEL_TYPES = ("dots1",)
RENAME = {**TEXT_RENAME, "gate": "router"}
ENVOYS = {hf.Dots1DecoderLayer: MoEBlock, hf.Dots1Attention: Attention, hf.Dots1MoE: GroupedMoE, hf.Dots1MLP: MLP}
ROOT = host("Dots1StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Dots1ForCausalLM)
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    config = model.text_config
    sliding = [i for i, kind in enumerate(config.layer_types) if kind != "full_attention"]
    if sliding:
        raise FamilyMismatch(f"{FAMILY}: blocks {sliding} attend in a sliding window (sliding_window, "
                             "max_window_layers); nncanon serves dots1 checkpoints whose blocks all attend in full")
    last = config.num_hidden_layers - 1
    return [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm", f"layers.{last}.mlp.router",
            f"layers.{last}.mlp.experts", f"layers.{last}.mlp.shared_experts"]
