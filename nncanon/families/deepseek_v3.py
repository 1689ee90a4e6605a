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
from ..core.layouts import HeadOutputs, Layout, Residual, layout
from ..core.locators import call, child, op
from ..core.model import StandardModel
from ..core.precision import SUBBLOCK
from ..core.relations import first, relation, rows
from ..core.values import Condition, Value
from ..core.views import View, heads
from ..parts.attention.softmax import ATTENTION_CALL, ATTENTION_RELATIONS, Attention
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
from ..research.weights import Layout as WeightLayout

FAMILY = "deepseek_v3"
MODEL_TYPES = ("deepseek_v3",)
RENAME = {**TEXT_RENAME, "gate": "router"}

_CALL = call("attention_interface_1")  # found by what it calls (`Call`)

QueryLatent = layout("QueryLatent", "batch seq q_lora_rank")
KVLatent = layout("KVLatent", "batch seq kv_lora_rank")
QueriesNope = Layout("QueriesNope", ("batch", "num_heads", "seq", "qk_nope_head_dim"))
QueriesRope = Layout("QueriesRope", ("batch", "num_heads", "seq", "qk_rope_head_dim"))
KeysNope = Layout("KeysNope", ("batch", "num_kv_heads", "seq", "qk_nope_head_dim"))
KeysRope = Layout("KeysRope", ("batch", "num_kv_heads", "seq", "qk_rope_head_dim"))

HAS_QUERY_LATENT = Condition(
    needs="", why="the checkpoint sets no q_lora_rank: its queries come straight from q_proj, with no latent",
    holds=lambda model: model.text_config.q_lora_rank is not None)


def part(which: str) -> View:
    """The no-rope (first ``qk_nope_head_dim`` columns) or rope part of a query/key head, as a view; an
    assignment writes it back into the whole head."""
    def span(host):
        nope = host._module.qk_nope_head_dim
        return slice(None, nope) if which == "nope" else slice(nope, None)

    def write(host, new, current):
        whole = current.clone()
        whole[..., span(host)] = new
        return whole

    return View(f"{which} part", lambda host, x: x[..., span(host)], write)


# -- the latents and the two parts of a head, by the module's own projections -----------------------------


def rotate(module, queries, keys, cos, sin):
    """The module's own rotary: interleaved pairs when the config says so (V3's default)."""
    rope = hf.apply_rotary_pos_emb_interleave if module.config.rope_interleave else hf.apply_rotary_pos_emb
    return rope(queries, keys, cos, sin)


@relation("query_latent == q_a_layernorm(q_a_proj(input)); kv_latent == kv_a_layernorm(kv_a_proj_with_mqa(input)"
          "[..., :kv_lora_rank])", proves="query_latent kv_latent", reads="input query_latent kv_latent")
def _latents(host, r):
    module, x = host._module, first(r["input"])
    kv = module.kv_a_proj_with_mqa(x)[..., :module.kv_lora_rank]
    return [(module.q_a_layernorm(module.q_a_proj(x)), r["query_latent"]),
            (module.kv_a_layernorm(kv), r["kv_latent"])]


@relation("attention_keys_nope, attention_values == kv_b_proj(kv_latent) split per head into qk_nope_head_dim and "
          "v_head_dim columns: the keys' no-rope part and the values are reconstructed from the latent",
          proves="attention_keys_nope attention_values kv_latent",
          reads="kv_latent attention_keys_nope attention_values")
def _reconstruct(host, r):
    module, latent = host._module, r["kv_latent"]
    up = module.kv_b_proj(latent).unflatten(-1, (-1, module.qk_nope_head_dim + module.v_head_dim)).transpose(1, 2)
    return [(up[..., :module.qk_nope_head_dim], r["attention_keys_nope"]),
            (up[..., module.qk_nope_head_dim:], r["attention_values"])]


@relation("attention_queries == [nope | rotary(rope)] of q_b_proj(query_latent) per head; attention_keys_rope == "
          "rotary(kv_a_proj_with_mqa(input)[..., kv_lora_rank:]), one per token, the same on every head",
          proves="attention_keys_rope query_latent", reads="inputs query_latent attention_queries attention_keys_rope",
          tolerance=SUBBLOCK)
def _parts(host, r):
    import torch

    module, (args, kwargs) = host._module, r["inputs"]
    x = first(args) if args else kwargs["hidden_states"]
    # the rotary the forward was handed (its positions follow the batch's left padding)
    cos, sin = kwargs["position_embeddings"]
    nope = module.qk_nope_head_dim
    q = module.q_b_proj(r["query_latent"]).unflatten(-1, (-1, module.qk_head_dim)).transpose(1, 2)
    k_rot = module.kv_a_proj_with_mqa(x)[..., module.kv_lora_rank:][:, None]
    q_rot, k_rot = rotate(module, q[..., nope:], k_rot, cos, sin)
    rope = r["attention_keys_rope"]
    return [(torch.cat([q[..., :nope], q_rot], -1), r["attention_queries"]),
            (k_rot.expand(-1, rope.shape[1], -1, -1), rope)]


@relation("attention_keys == [attention_keys_nope | attention_keys_rope] per head; attention_queries == "
          "[attention_queries_nope | attention_queries_rope] per head: the first qk_nope_head_dim and the last "
          "qk_rope_head_dim columns", proves="attention_keys attention_queries_nope attention_queries_rope",
          reads="attention_queries attention_keys attention_queries_nope attention_queries_rope attention_keys_nope "
                "attention_keys_rope")
def _columns(host, r):
    """The keys the scores read are the reconstructed no-rope part and the shared rotary part side by side (the
    link from each to the scores); the same numbers moved, so exact."""
    import torch

    return [(torch.cat([r["attention_keys_nope"], r["attention_keys_rope"]], -1), r["attention_keys"]),
            (torch.cat([r["attention_queries_nope"], r["attention_queries_rope"]], -1), r["attention_queries"])]


_QUERIES, _KEYS = op(_CALL, io="input", element=1), op(_CALL, io="input", element=2)

#: no W_Q/W_K/W_V: multi-head latent attention factors them through low-rank latents with a norm between the
#: factors, so no one matrix maps the input to a head; the refusal (one line, the page's row too) names what is
#: served in standard names instead, and the factors' native weights
_LATENT = WeightLayout(unmapped="multi-head latent attention (MLA) has no per-head query, key or value matrix: keys "
                                "and values are kv_b_proj(kv_a_layernorm(kv_a_proj_with_mqa(x))) and queries "
                                "q_b_proj(q_a_layernorm(q_a_proj(x))) (q_proj(x) without a q_lora_rank, not served), "
                                "a norm between the factors; in standard names read self_attn.query_latent (with a "
                                "q_lora_rank), kv_latent, attention_queries_nope, attention_queries_rope, "
                                "attention_keys_nope, attention_keys_rope and W_O, the factors as the weights of "
                                "q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj")

LatentAttention = host("LatentAttention", Attention, WEIGHTS=_LATENT, values=[
    Value("query_latent", QueryLatent, "The query latent: q_a_proj's output after q_a_layernorm, what q_b_proj reads",
          child("q_a_layernorm"), conditions=(HAS_QUERY_LATENT,)),
    Value("kv_latent", KVLatent,
          "The key/value latent: kv_a_proj_with_mqa's first kv_lora_rank columns after kv_a_layernorm, what "
          "kv_b_proj reads and the cache holds", child("kv_a_layernorm")),
    Value("attention_queries_nope", QueriesNope, "The queries' position-free part: each head's first "
          "qk_nope_head_dim columns", _QUERIES, view=part("nope"), conditions=(ATTENTION_CALL,)),
    Value("attention_queries_rope", QueriesRope, "The queries' rotated part: each head's last qk_rope_head_dim "
          "columns", _QUERIES, view=part("rope"), conditions=(ATTENTION_CALL,)),
    Value("attention_keys_nope", KeysNope, "The keys' position-free part, from kv_b_proj: each head's first "
          "qk_nope_head_dim columns", _KEYS, view=part("nope"), conditions=(ATTENTION_CALL,)),
    Value("attention_keys_rope", KeysRope, "The keys' rotated part, one per token shared by every head: each "
          "head's last qk_rope_head_dim columns", _KEYS, view=part("rope"), conditions=(ATTENTION_CALL,)),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=heads("v_head_dim")),
], RELATIONS=(_latents, _reconstruct, _parts, _columns, *ATTENTION_RELATIONS))

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
