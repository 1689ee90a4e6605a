"""Hunyuan MoE (HunYuanMoEV1ForCausalLM, model_type hunyuan_v1_moe): Tencent's Hunyuan-A13B, the dense Hunyuan's
block with a mixture of experts beside one shared expert on every block.

Every block is RMSNorm -> attention -> add, RMSNorm -> mixture -> add. The attention is the dense Hunyuan's
(nncanon.families.hunyuan_v1_dense): grouped-query, each query and key head RMS-normed by query_layernorm and
key_layernorm after the rotary. The MLP (native ``mlp``) runs the shared expert first (native ``shared_mlp``, served
as ``shared_experts``: a SwiGLU MLP of width intermediate_size that every token goes through, ungated), then routes:
the router (native ``gate``, served as ``router``) is one bias-free float32 linear ``wg``, softmaxed over every
expert, whose num_experts_per_tok (``moe_topk``) largest probabilities are divided by their sum; the fused SwiGLU
experts (each intermediate_size wide, as the shared expert) add up their weighted outputs, and the shared expert's
output is added to them: mlp_output == routed_output + shared_experts.mlp_output. The routing is the shared
mixture's (nncanon.parts.blocks.mixture, renormalised; its router weight read from ``wg``), the shared expert's add
DeepSeek-V3's; no relation is the family's own. A published config may give ``moe_topk`` and
``num_shared_expert`` per block, as lists; transformers' class reads one top-k per block and always builds one
shared expert, so a list with two different values, or a block with no shared expert, is refused.
"""

from __future__ import annotations

import sys

from transformers.models.hunyuan_v1_moe import modeling_hunyuan_v1_moe as hf

from ..core.hosts import host
from ..core.layouts import Residual, RouterLogits
from ..core.locators import child
from ..core.model import FamilyMismatch, StandardModel
from ..core.values import Value
from ..core.views import TOKENS
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
from ..parts.blocks.mixture import (
    MOE_RELATIONS,
    SHARED_INPUT_RELATION,
    UNGATED_SHARED_RELATION,
    MoE,
    MoEBlock,
    routing,
)
from ..parts.blocks.mlp import MLP

FAMILY = "hunyuan_v1_moe"
MODEL_TYPES = ("hunyuan_v1_moe",)
RENAME = {**TEXT_RENAME, "gate": "router", "shared_mlp": "shared_experts"}

#: the router's logits are its linear wg's output (no F.linear in the gate's forward); the top-k renormalised
HunyuanMoE = host("HunyuanMoE", MoE, values=[
    Value("router_logits", RouterLogits, "The router's logits, one per expert (its linear wg's output, float32)",
          child("router.wg", shown="router.wg"), view=TOKENS),
    Value("shared_expert_output", Residual, "The shared expert's output, added ungated", child("shared_experts")),
], RELATIONS=(routing(True), MOE_RELATIONS[1], UNGATED_SHARED_RELATION, SHARED_INPUT_RELATION))

#: the shared expert is the dense SwiGLU MLP, called on the [batch, seq, hidden] rows the mixture receives
SharedExpertMLP = host("SharedExpertMLP", MLP, HOST="model.layers[i].mlp.shared_experts", KIND="shared expert MLP")

ENVOYS = {hf.HunYuanMoEV1DecoderLayer: MoEBlock, hf.HunYuanMoEV1Attention: Attention, hf.HunYuanMoEV1Moe: HunyuanMoE,
          hf.HunYuanMoEV1MLP: SharedExpertMLP}
ROOT = host("HunyuanV1MoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.HunYuanMoEV1ForCausalLM)
layer_types = attention_layer_types  # HunYuanMoEV1Config has no layer_types: full attention on every block
prepare = nothing_to_prepare


def _one(value, name: str) -> int:
    values = set(value) if isinstance(value, (list, tuple)) else {value}
    if len(values) != 1:
        raise FamilyMismatch(f"{FAMILY}: {name} differs between blocks ({sorted(values)}); transformers' "
                             "HunYuanMoEV1 class builds every block alike")
    return values.pop()


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"num_experts": _one(config.num_experts, "num_experts"), "top_k": _one(config.moe_topk, "moe_topk"),
            "intermediate_size": config.intermediate_size}


def required_paths(model: StandardModel) -> list[str]:
    shared = getattr(model.text_config, "num_shared_expert", 1)
    if _one(shared, "num_shared_expert") != 1:
        raise FamilyMismatch(f"{FAMILY}: num_shared_expert is {shared}; transformers' class builds one shared expert")
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.router.wg", "layers.0.mlp.experts",
            "layers.0.mlp.shared_experts"]
