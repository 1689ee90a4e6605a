"""Aria's language model (AriaTextForCausalLM, model_type aria_text): Rhymes AI's Aria, Llama's block with a mixture
on every block, routed by a softmax over the chosen logits, beside shared experts.

Every block is RMSNorm -> attention -> add, RMSNorm -> mixture -> add; the attention is Llama's (no q/k norms, no
biases, the rotary on every block, every head its own keys and values on the released checkpoint). The mixture's
router (``router``, a bare weight) takes the top ``moe_topk`` of its raw logits and weights the chosen experts by a
softmax over those chosen logits alone, the same weights as a softmax over every expert renormalised over the chosen
(nncanon.parts.blocks.mixture's ``chosen_softmax_routing``, gpt-oss's without the bias). The routed experts are
SwiGLU whatever ``hidden_act`` says, stored [in, out] (``is_transposed``: ``gate_up_proj [experts, hidden,
2·intermediate_size]``, the gate half first, ``down_proj [experts, intermediate_size, hidden]``), each
``intermediate_size`` wide; the shared experts are one SwiGLU MLP ``moe_num_shared_experts`` times as wide, reading
the block's normed stream, added ungated. Served as the text model of ``AriaForConditionalGeneration`` checkpoints
(``text_config``), loaded as AriaTextForCausalLM; the vision tower and projector are not part of this family.
"""

from __future__ import annotations

import sys

from transformers.models.aria import modeling_aria as hf

from ..core.hosts import host
from ..core.layouts import Residual, RouterLogits
from ..core.locators import child, op
from ..core.model import StandardModel
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
    chosen_softmax_routing,
    expert_dims,
)
from ..parts.blocks.mlp import MLP

FAMILY = "aria_text"
MODEL_TYPES = ("aria_text",)
RENAME = TEXT_RENAME

AriaMoE = host("AriaMoE", MoE, values=[
    Value("router_logits", RouterLogits, "The router's logits, one per expert, before the top k",
          op("nn_functional_linear_0", module="router"), view=TOKENS),
    Value("shared_expert_output", Residual, "The shared experts' output, added ungated", child("shared_experts")),
], RELATIONS=(chosen_softmax_routing(bias=False), MOE_RELATIONS[1], UNGATED_SHARED_RELATION, SHARED_INPUT_RELATION))

ENVOYS = {hf.AriaTextDecoderLayer: MoEBlock, hf.AriaTextAttention: Attention, hf.AriaTextMoELayer: AriaMoE,
          hf.AriaSharedExpertsMLP: MLP}
ROOT = host("AriaTextStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.AriaTextForCausalLM)
layer_types = attention_layer_types  # AriaTextConfig has no layer_types: every block a full-attention mixture
prepare = nothing_to_prepare


dim_sizes = expert_dims("moe_num_experts", "moe_topk")


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.mlp.router", "layers.0.mlp.experts", "layers.0.mlp.shared_experts"]
