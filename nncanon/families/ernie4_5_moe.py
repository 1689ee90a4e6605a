"""ERNIE 4.5 MoE (Ernie4_5_MoeForCausalLM, model_type ernie4_5_moe): Baidu's ERNIE-4.5-21B-A3B, the dense ERNIE
4.5's block with a dense first block, then a mixture beside shared experts.

Every block is RMSNorm -> attention -> add, RMSNorm -> MLP -> add. The attention is the dense ERNIE 4.5's
(nncanon.families.ernie4_5): grouped-query, its rotary on adjacent pairs, no biases. The MLP is a dense SwiGLU on
the blocks before moe_layer_start_index (kind ``dense``) and a mixture on every moe_layer_interval-th block from
there to moe_layer_end_index (kind ``mixture``). The mixture flattens the tokens, runs its shared experts (native
``shared_experts``: one SwiGLU MLP moe_num_shared_experts · moe_intermediate_size wide, every token, ungated), then
routes: the router (native ``gate``, a float32 weight) softmaxes its logits over every expert, picks the top k of
those probabilities plus a per-expert correction bias (``moe_statics.e_score_correction_bias``), and weights the
chosen experts by their probabilities without the bias, renormalised (divided by their sum, at least
moe_norm_min); the fused SwiGLU experts add up their weighted outputs and the shared experts' output is added to
them. The routing relation is the shared mixture's corrected softmax routing (nncanon.parts.blocks.mixture), the
shared expert's add DeepSeek-V3's; no relation is the family's own.
"""

from __future__ import annotations

import sys

from transformers.models.ernie4_5_moe import modeling_ernie4_5_moe as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import child
from ..core.model import StandardModel
from ..core.values import Value
from ..core.views import TOKENS
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import (
    CORRECTED_ROUTING,
    MOE_RELATIONS,
    SHARED_INPUT_RELATION,
    UNGATED_SHARED_RELATION,
    MoE,
    MoEBlock,
)
from ..parts.blocks.mlp import MLP, TokenMLP

FAMILY = "ernie4_5_moe"
MODEL_TYPES = ("ernie4_5_moe",)
RENAME = {**TEXT_RENAME, "gate": "router"}

#: the bias-corrected softmax routing, and the shared experts (on the flattened rows) added ungated
ErnieMoE = host("ErnieMoE", MoE, values=[
    Value("shared_expert_output", Residual, "The shared experts' output, added ungated", child("shared_experts"),
          view=TOKENS),
], RELATIONS=(CORRECTED_ROUTING, MOE_RELATIONS[1], UNGATED_SHARED_RELATION, SHARED_INPUT_RELATION))

# Ernie4_5_MoeMLP is both a dense block's MLP and the mixture's shared experts (called on flattened rows): a path key
# gives the shared experts their token view, the class key of the mixture wins over the path key "mlp"
ENVOYS = {hf.Ernie4_5_MoeDecoderLayer: MoEBlock, hf.Ernie4_5_MoeAttention: Attention,
          hf.Ernie4_5_MoeSparseMoeBlock: ErnieMoE, "shared_experts": TokenMLP, "mlp": MLP}
ROOT = host("Ernie45MoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Ernie4_5_MoeForCausalLM)
prepare = nothing_to_prepare


def _is_mixture(config, i: int) -> bool:
    """Ernie4_5_MoeDecoderLayer's own rule for which blocks hold a mixture."""
    return ((i + 1) % config.moe_layer_interval == 0 and config.moe_layer_start_index <= i
            <= config.moe_layer_end_index)


def layer_types(model) -> list[str]:
    """``dense`` on the blocks outside moe_layer_start_index..moe_layer_end_index (or off the interval), ``mixture``
    on the others (every block's attention is the same)."""
    config = model.text_config
    return ["mixture" if _is_mixture(config, i) else "dense" for i in range(config.num_hidden_layers)]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"intermediate_size": config.intermediate_size, "num_experts": config.moe_num_experts,
            "top_k": config.moe_k}


def required_paths(model: StandardModel) -> list[str]:
    last = model.text_config.num_hidden_layers - 1
    return [*TEXT_PATHS, f"layers.{last}.mlp.router", f"layers.{last}.mlp.experts", f"layers.{last}.mlp.shared_experts"]
