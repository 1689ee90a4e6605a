"""LFM2-MoE (Lfm2MoeForCausalLM, model_type lfm2_moe): LFM2's gated short convolutions and attention over mixtures.

The stack is LFM2's (`nncanon.families.lfm2`): ``config.layer_types`` gives each block the gated short
convolution ``conv`` or grouped-query attention ``self_attn`` with q/k norms, every block pre-norm
RMSNorm. The first ``num_dense_layers`` blocks keep a dense SwiGLU MLP (``intermediate_size``, not
adjusted as LFM2's is); every later one a mixture of ``num_experts`` experts (native ``feed_forward``,
its router ``gate``): the router scores each expert by the sigmoid of its logit, picks the top
``num_experts_per_tok`` of the scores plus a per-expert ``expert_bias`` (used for the choice only), and
weighs the chosen experts by their scores, renormalised over them (``norm_topk_prob``) and times
``routed_scaling_factor``. There is no shared expert.

The short convolution's values and its state are `nncanon.parts.recurrent.short_conv`'s, as on LFM2.
"""

from __future__ import annotations

import sys

import torch
from transformers.models.lfm2_moe import modeling_lfm2_moe as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import first, relation, rows
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.blocks.mixture import MOE_RELATIONS, MoE, MoEBlock, moe_dim_sizes
from ..parts.recurrent import short_conv
from ..parts.recurrent.short_conv import ShortConv
from . import lfm2

FAMILY = "lfm2_moe"
MODEL_TYPES = ("lfm2_moe",)
RENAME = {**lfm2.RENAME, "gate": "router"}
MIXERS = lfm2.MIXERS

Lfm2MoeBlock = host("Lfm2MoeBlock", MoEBlock, MIXERS=tuple(MIXERS.values()))


# the logits are one hidden_size-term product per expert, recomputed in float32 as the router computes them
@relation("router_logits == router.weight · input; scores = sigmoid(router_logits); expert_indices == the top_k of "
          "scores + expert_bias; expert_weights == the chosen scores / (their sum + 1e-6) · routed_scaling_factor "
          "(renormalised when norm_topk_prob)", proves="router_logits expert_indices expert_weights",
          reads="input router_logits expert_indices expert_weights")
def _sigmoid_routing(host, r):
    module = host._module
    gate = module.gate
    logits = rows(first(r["input"])) @ gate.weight.T
    scores = logits.sigmoid()
    choice = scores + module.expert_bias if gate.use_expert_bias else scores
    indices = choice.topk(gate.top_k, dim=-1).indices
    weights = scores.gather(-1, indices)
    if gate.norm_topk_prob:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-6)
    weights = weights * gate.routed_scaling_factor
    read_indices = rows(r["expert_indices"]).long()
    # equal scores may be ordered either way: compare sets of experts, and weights by expert
    by_expert = torch.zeros_like(scores, dtype=torch.float64).scatter(-1, indices, weights.double())
    read_by_expert = torch.zeros_like(by_expert).scatter(-1, read_indices, rows(r["expert_weights"]).double())
    return [(logits, rows(r["router_logits"])), (indices.sort(-1).values, read_indices.sort(-1).values),
            (by_expert, read_by_expert)]


SigmoidMoE = host("SigmoidMoE", MoE, RELATIONS=(_sigmoid_routing, *MOE_RELATIONS[1:]))
assert MOE_RELATIONS[0].text.startswith("router_logits == router.weight")  # the one replaced

ENVOYS = {hf.Lfm2MoeDecoderLayer: Lfm2MoeBlock, hf.Lfm2MoeAttention: Attention, hf.Lfm2MoeShortConv: ShortConv,
          hf.Lfm2MoeMLP: lfm2.FunctionalMLP, hf.Lfm2MoeSparseMoeBlock: SigmoidMoE}
ROOT = host("Lfm2MoeStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Lfm2MoeForCausalLM)
explain_missing = lfm2.explain_missing


def layer_types(model) -> list[str]:
    """The mixer's layer type (``conv``, ``full_attention``), ``_dense`` added on the first num_dense_layers."""
    config = model.text_config
    return [t + ("_dense" if i < config.num_dense_layers else "") for i, t in enumerate(config.layer_types)]


def required_paths(model: StandardModel) -> list[str]:
    config = model.text_config
    types = list(config.layer_types)
    sparse = config.num_dense_layers
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.mlp",
            "layers.0.post_attention_layernorm", f"layers.{types.index('conv')}.conv",
            f"layers.{types.index('full_attention')}.self_attn", f"layers.{sparse}.mlp.router",
            f"layers.{sparse}.mlp.experts"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size, **moe_dim_sizes(model),
            **short_conv.dim_sizes(model)}


def prepare(model: StandardModel) -> None:
    short_conv.prepare(model, hf)
