"""DeepSeek-V3 / R1 (DeepseekV3ForCausalLM, model_type deepseek_v3): latent attention, dense then a grouped mixture.

The block is pre-norm, Llama's shape. Its attention is **multi-head latent attention**: the stream is
projected down to a query latent (``q_a_proj``, normed by ``q_a_layernorm``: ``query_latent``) and to
one key/value latent (the first ``kv_lora_rank`` columns of ``kv_a_proj_with_mqa``, normed by
``kv_a_layernorm``: ``kv_latent``, what the cache holds), each projected back up per head
(``q_b_proj``, ``kv_b_proj``). A query or key head is two parts side by side: ``qk_nope_head_dim``
columns with no position (``attention_queries_nope``, ``attention_keys_nope``, the keys' from
``kv_b_proj``) and ``qk_rope_head_dim`` rotated ones (``attention_queries_rope``; the keys' rotated part,
``attention_keys_rope``, is the last columns of ``kv_a_proj_with_mqa``, one for the token, shared by
every head). The values are the rest of ``kv_b_proj``'s head, ``v_head_dim`` wide, narrower than a
query/key head: ``head_dim`` on this page is ``v_head_dim`` and ``qk_head_dim`` the query/key width.
The rotary is YaRN on interleaved pairs, and its mscale enters the attention scale, so ``scaling``
is not ``qk_head_dim ** -0.5``.

The first ``first_k_dense_replace`` blocks have a dense SwiGLU MLP (kind ``dense``); the rest a
mixture (kind ``mixture``): the router (native name ``gate``) scores every expert by the sigmoid of its
logit, adds ``e_score_correction_bias`` for the choice only, ranks the ``n_group`` groups by the sum of
their two best scores, keeps ``topk_group`` groups and the ``num_experts_per_tok`` best experts inside
them; the weights are the chosen experts' sigmoid scores (without the bias), divided by their sum
(``norm_topk_prob``) and multiplied by ``routed_scaling_factor``, so they add up to that factor. A
shared expert (an MLP of width ``moe_intermediate_size · n_shared_experts``) reads the same input and
is added ungated: ``mlp_output = routed_output + shared_expert_output``.
"""

from __future__ import annotations

import sys

from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import child
from ..core.model import StandardModel
from ..core.relations import first, relation, rows
from ..core.values import Value
from ..parts.attention.latent import LatentAttention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mixture import (
    MOE_RELATIONS,
    SHARED_INPUT_RELATION,
    UNGATED_SHARED_RELATION,
    MoE,
    MoEBlock,
)
from ..parts.blocks.mlp import MLP

FAMILY = "deepseek_v3"
MODEL_TYPES = ("deepseek_v3",)
RENAME = {**TEXT_RENAME, "gate": "router"}

# -- the mixture: sigmoid scores, grouped top-k, scaled weights, a shared expert --------------------------


@relation("router_logits == router.weight · input; scores = sigmoid(router_logits); expert_indices == the "
          "top_k of scores + e_score_correction_bias within the topk_group groups whose two best such scores "
          "sum highest; expert_weights == the chosen scores / their sum · routed_scaling_factor",
          proves="router_logits expert_indices expert_weights",
          reads="input router_logits expert_indices expert_weights")
def _grouped_routing(host, r):
    import torch

    gate = host._module.gate
    logits = rows(first(r["input"])).float() @ gate.weight.float().T
    scores = logits.sigmoid()
    choice = scores + gate.e_score_correction_bias
    grouped = choice.unflatten(-1, (gate.num_group, -1))
    best_groups = grouped.topk(2, dim=-1).values.sum(-1).topk(gate.topk_group, dim=-1).indices
    keep = torch.zeros_like(grouped[..., 0]).scatter(-1, best_groups, 1.0).bool()
    choice = choice.masked_fill(~keep.repeat_interleave(grouped.shape[-1], -1), float("-inf"))
    indices = choice.topk(gate.top_k, dim=-1).indices
    weights = scores.gather(-1, indices)
    if gate.norm_topk_prob:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    weights = weights * gate.routed_scaling_factor
    read_indices = rows(r["expert_indices"]).long()
    by_expert = torch.zeros_like(scores).scatter(-1, indices, weights)
    read_by_expert = torch.zeros_like(scores).scatter(-1, read_indices, rows(r["expert_weights"]).float())
    return [(logits, rows(r["router_logits"])), (indices.sort(-1).values, read_indices.sort(-1).values),
            (by_expert, read_by_expert)]


GroupedMoE = host("GroupedMoE", MoE, values=[
    Value("shared_expert_output", Residual,
          "The shared expert's output, added ungated", child("shared_experts")),
], RELATIONS=(_grouped_routing, MOE_RELATIONS[1], UNGATED_SHARED_RELATION, SHARED_INPUT_RELATION))

ENVOYS = {hf.DeepseekV3DecoderLayer: MoEBlock, hf.DeepseekV3Attention: LatentAttention, hf.DeepseekV3MoE: GroupedMoE,
          hf.DeepseekV3MLP: MLP}
ROOT = host("DeepseekV3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.DeepseekV3ForCausalLM)
prepare = nothing_to_prepare


def layer_types(model) -> list[str]:
    """``dense`` on the first first_k_dense_replace blocks, ``mixture`` after (every block's attention is latent)."""
    config = model.text_config
    return ["dense" if i < config.first_k_dense_replace else "mixture" for i in range(config.num_hidden_layers)]


def qk_head_dim(model) -> int:
    config = model.text_config
    return config.qk_nope_head_dim + config.qk_rope_head_dim


def head_dim(model) -> int:
    """A value head's width: v_head_dim (transformers' config.head_dim is qk_rope_head_dim, the rotated part)."""
    return model.text_config.v_head_dim


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"num_kv_heads": config.num_attention_heads,
            "q_lora_rank": config.q_lora_rank or 0, "kv_lora_rank": config.kv_lora_rank,
            "qk_nope_head_dim": config.qk_nope_head_dim, "qk_rope_head_dim": config.qk_rope_head_dim,
            "intermediate_size": config.intermediate_size, "num_experts": config.n_routed_experts,
            "top_k": config.num_experts_per_tok}


def required_paths(model: StandardModel) -> list[str]:
    last = model.text_config.num_hidden_layers - 1
    return [*TEXT_PATHS, "layers.0.self_attn.kv_a_layernorm", "layers.0.self_attn.kv_b_proj",
            f"layers.{last}.mlp.router", f"layers.{last}.mlp.experts", f"layers.{last}.mlp.shared_experts"]
