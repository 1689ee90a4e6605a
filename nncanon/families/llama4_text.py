"""Llama 4 text (Llama4ForCausalLM, model_type llama4_text): chunked and NoPE attention, a sigmoid-scaled mixture.

The block is pre-norm, Llama's shape; its MLP is native ``feed_forward`` (standard ``mlp``). Its
attention is grouped-query and of two kinds (``config.layer_types``, from ``no_rope_layers``): on
``chunked_attention`` blocks (three in four) the queries and keys get the rotary (complex, on
interleaved pairs) and an L2 norm with no gain (``qk_norm``, when ``use_qk_norm``), and a query sees only
the keys of its own chunk of ``attention_chunk_size`` tokens, counted from the first real token; on
``full_attention`` blocks (every fourth) there is no rotary and no norm, the query sees the whole
prefix, and with ``attn_temperature_tuning`` each query is multiplied by ``1 + attn_scale ·
log(1 + floor((position + 1) / floor_scale))`` before the attention call (``attention_queries`` are the
scaled ones).

The MLP is dense (``intermediate_size_mlp`` wide) or, on ``moe_layers``, a mixture: the router (a
linear without a bias) keeps each token's top ``num_experts_per_tok`` logits, and ``router_scores`` are
their sigmoids, 0 for every other expert. The score scales the expert's **input**, not its output:
``expert_inputs[..., e, :] = router_scores[..., e] · input``, and every expert runs on every token (an
unchosen one on a zero input, giving zero). ``routed_output`` sums ``expert_outputs`` over the experts,
and a shared expert (``shared_experts``, native ``shared_expert``, ``intermediate_size`` wide) on the
unscaled input is added: ``mlp_output = shared_expert_output + routed_output``. The mixture works on
token-flattened rows; its values are served ``[batch, seq, ...]``. Text-only checkpoints load; a Llama 4
multimodal checkpoint's language model is not unpacked here.
"""

from __future__ import annotations

import sys

import torch
from transformers.models.llama4 import modeling_llama4 as hf

from ..core.hosts import host
from ..core.layouts import Layout, Neurons, Residual, RouterLogits
from ..core.locators import child, op, own
from ..core.model import StandardModel
from ..core.precision import SUBBLOCK
from ..core.relations import first, relation, rows
from ..core.values import Value
from ..core.views import View, _tokens_read, _tokens_write
from ..parts.attention.softmax import (
    ATTENTION_RELATIONS,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    Attention,
    real_queries,
)
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, TEXT_PATHS, TEXT_RENAME, text_only
from ..parts.blocks.mixture import SHARED_INPUT_RELATION, MoEBlock
from ..research.weights import MLP as WEIGHTS_MLP
from ..research.weights import Weight

FAMILY = "llama4_text"
MODEL_TYPES = ("llama4_text",)
RENAME = {**TEXT_RENAME, "feed_forward": "mlp", "shared_expert": "shared_experts", "activation_fn": "act_fn"}

# -- attention: chunked with the rotary, or global with no positions and a query temperature -------------


def chunked(module) -> bool:
    return module.config.layer_types[module.layer_idx] == "chunked_attention"


def allowed_keys(module, padding, queries: int, keys: int):
    """[batch, 1, queries, keys] booleans: causal, no padded key and, on a chunked block, the same chunk of
    attention_chunk_size tokens, positions counted from each row's first real token (transformers' mask)."""
    positions = (padding.cumsum(-1) - 1).clamp(min=0)[:, -keys:]
    q_pos, k_pos = positions[:, -queries:, None], positions[:, None, :]
    q_at = torch.arange(keys - queries, keys)[None, :, None]
    allowed = (torch.arange(keys)[None, None, :] <= q_at) & padding[:, None, -keys:].bool()
    if chunked(module):
        size = module.config.attention_chunk_size
        allowed = allowed & (q_pos // size == k_pos // size)
    return allowed[:, None]


def pattern(module, queries, keys, padding):
    queries, keys = queries.double(), keys.double()
    keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    scores = queries @ keys.transpose(-1, -2) * module.scaling
    scores = scores.masked_fill(~allowed_keys(module, padding, queries.shape[2], keys.shape[2]), float("-inf"))
    return scores, scores.softmax(-1)


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + mask) · attention_values; "
          "the mask is causal, and on chunked_attention blocks keeps only the keys of the query's chunk of "
          "attention_chunk_size tokens", proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _attention(host, r):
    padding = r["model.attention_mask"]
    _, probabilities = pattern(host._module, r["attention_queries"], r["attention_keys"], padding)
    values = r["attention_values"].double().repeat_interleave(probabilities.shape[1] // r["attention_values"].shape[1], 1)
    heads = (probabilities @ values).transpose(1, 2)
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + the (chunked) causal mask; "
          "attention_probabilities == softmax(attention_scores)", proves="attention_scores attention_probabilities",
          reads="model.attention_mask attention_queries attention_keys attention_scores attention_probabilities",
          tolerance=SUBBLOCK)
def _pattern(host, r):
    padding = r["model.attention_mask"]
    scores, probabilities = pattern(host._module, r["attention_queries"], r["attention_keys"], padding)
    allowed = torch.isfinite(scores)
    return [(scores[allowed], r["attention_scores"].double()[allowed]),
            (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]


@relation("attention_queries, attention_keys == q_proj(input), k_proj(input) per head: on chunked_attention blocks "
          "rotated and L2-normed (qk_norm); on full_attention blocks not rotated, the queries multiplied by "
          "1 + attn_scale · log(1 + floor((position + 1) / floor_scale))",
          proves="attention_queries attention_keys", reads="inputs attention_queries attention_keys", tolerance=SUBBLOCK)
def _positions(host, r):
    module, (args, kwargs) = host._module, r["inputs"]
    x = first(args) if args else kwargs["hidden_states"]
    q = module.q_proj(x).unflatten(-1, (-1, module.head_dim))
    k = module.k_proj(x).unflatten(-1, (-1, module.head_dim))
    if module.use_rope:
        q, k = hf.apply_rotary_emb(q, k, kwargs["position_embeddings"])
        if hasattr(module, "qk_norm"):
            q, k = module.qk_norm(q), module.qk_norm(k)
    elif module.attn_temperature_tuning:
        positions = torch.arange(x.shape[1]).float()
        scale = torch.log1p(torch.floor((positions + 1.0) / module.floor_scale)) * module.attn_scale + 1.0
        q = q * scale[None, :, None, None]
    return [(q.transpose(1, 2), r["attention_queries"]), (k.transpose(1, 2), r["attention_keys"])]


ChunkedAttention = host("ChunkedAttention", Attention, RELATIONS=(_attention, _pattern, _positions,
                                                                 HEAD_RESULTS_RELATION, *LINK_RELATIONS,
                                                                 ATTENTION_RELATIONS[-1]))
assert ATTENTION_RELATIONS[-1].text == "attention_output == o_proj(attention_premix)"

# -- the MLPs: the dense MLP ([batch, seq] rows) and the shared expert (token rows), one module class --------


@relation("mlp_activation == act_fn(gate_proj(input)); mlp_neurons == mlp_activation · up_proj(input); "
          "mlp_output == down_proj(mlp_neurons)", proves="mlp_activation mlp_neurons mlp_output",
          reads="input mlp_activation mlp_neurons mlp_output")
def _gated(host, r):
    module, x = host._module, rows(first(r["input"]))
    activation = module.activation_fn(module.gate_proj(x))
    neurons = activation * module.up_proj(x)
    return [(activation, rows(r["mlp_activation"])), (neurons, rows(r["mlp_neurons"])),
            (module.down_proj(neurons), rows(r["mlp_output"]))]


_TOKENS = View("tokens", _tokens_read, _tokens_write)
#: the mixture adds the routed output into the shared expert's output tensor in place (out.add_), so a
#: live view of it would read the whole MLP's output by the time it is used: it is served as a copy
_COPY = View("tokens, a copy", lambda host, x: _tokens_read(host, x).clone(), None)
_SHARED_OUTPUT = ("The shared expert's output on the unscaled input; read-only, a copy (the mixture adds the routed "
                  "output into this tensor in place)")

MLP = host("MLP", **WEIGHTS_MLP, values=[
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn")),
    Value("mlp_neurons", Neurons, "What the down projection receives: act(gate)·up", child("down_proj", "input")),
    Value("mlp_output", Residual, "What the MLP adds to the residual stream", own("output")),
], HOST="model.layers[i].mlp", KIND="dense MLP", RELATIONS=(_gated,))

SharedMLP = host("SharedMLP", **WEIGHTS_MLP, values=[
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn"), view=_TOKENS),
    Value("mlp_neurons", Neurons, "What the down projection receives: act(gate)·up", child("down_proj", "input"),
          view=_TOKENS),
    Value("mlp_output", Residual, _SHARED_OUTPUT, own("output"), view=_COPY),
], HOST="model.layers[i].mlp.shared_experts", KIND="shared expert MLP", RELATIONS=(_gated,))

# -- the mixture: sigmoid scores on the experts' inputs, every expert on every token, a shared expert ---------

RouterScores = Layout("RouterScores", ("batch", "seq", "num_experts"))
PerExpert = Layout("PerExpert", ("batch", "seq", "num_experts", "hidden_size"))


def _per_expert_read(host, x):
    batch, seq = host._std_model.token_shape()
    return x.view(-1, batch, seq, x.shape[-1]).permute(1, 2, 0, 3)


def _per_expert_write(host, new, current):
    return new.permute(2, 0, 1, 3).reshape(current.shape)


PER_EXPERT = View("per expert", _per_expert_read, _per_expert_write)


@relation("router_logits == router.weight · input; router_scores == sigmoid(router_logits) on the top "
          "num_experts_per_tok logits, 0 on every other expert", proves="router_logits router_scores",
          reads="input router_logits router_scores")
def _routing(host, r):
    router = host._module.router
    logits = rows(first(r["input"])) @ router.weight.T
    top = logits.topk(router.top_k, dim=-1)
    scores = torch.zeros_like(logits).scatter(-1, top.indices, torch.sigmoid(top.values))
    return [(logits, rows(r["router_logits"])), (scores, rows(r["router_scores"]))]


@relation("expert_inputs[..., e, :] == router_scores[..., e] · input; expert_outputs[..., e, :] == down_proj[e]"
          "(act(gate) · up) of gate, up = expert_inputs[..., e, :] · gate_up_proj[e]",
          proves="expert_inputs expert_outputs", reads="input router_scores expert_inputs expert_outputs",
          tolerance=SUBBLOCK, exact=False)
def _experts(host, r):
    # token by token, where the forward bmm's each expert's tokens at once: the BLAS reduces in its own order
    # (not exact, on any CPU)
    experts = host._module.experts
    x = first(r["input"]).reshape(*r["router_scores"].shape[:2], -1)
    inputs = r["router_scores"][..., None] * x[..., None, :]
    gate, up = (inputs[..., None, :] @ experts.gate_up_proj).squeeze(-2).chunk(2, dim=-1)
    outputs = ((experts.act_fn(gate) * up)[..., None, :] @ experts.down_proj).squeeze(-2)
    return [(inputs, r["expert_inputs"]), (outputs, r["expert_outputs"])]


@relation("routed_output == Σ over experts of expert_outputs; mlp_output == shared_expert_output + routed_output; "
          "shared_expert_output == shared_experts.mlp_output (on the unscaled input)",
          proves="routed_output shared_expert_output mlp_output",
          reads="expert_outputs routed_output shared_experts.mlp_output shared_expert_output mlp_output")
def _sum(host, r):
    return [(r["expert_outputs"].sum(-2), r["routed_output"]),
            (r["shared_expert_output"] + r["routed_output"], r["mlp_output"]),
            (r["shared_experts.mlp_output"], r["shared_expert_output"])]


def _halves(host, part: str):
    """Llama 4's experts: ``gate_up_proj [experts, hidden, 2·intermediate]`` stored ``[in, out]`` (the forward
    bmm's it), the gate the first half of its columns and the up the second (``gate_up.chunk(2, dim=-1)``);
    ``down_proj [experts, intermediate, hidden]``: views, so an edit lands."""
    experts = host.experts._module
    if part == "out":
        return experts.down_proj
    gate, up = experts.gate_up_proj.chunk(2, dim=-1)
    return gate if part == "gate" else up


#: the per-expert weights (nncanon.weights' names) over the fused [in, out] experts; the experts have no bias
EXPERT_WEIGHTS = {w.name: w for w in [
    Weight("W_in", "num_experts hidden_size expert_intermediate_size",
           "Each expert's up projection: the second half of experts.gate_up_proj's columns", lambda h: _halves(h, "in")),
    Weight("W_gate", "num_experts hidden_size expert_intermediate_size",
           "Each expert's gate projection: the first half of experts.gate_up_proj's columns",
           lambda h: _halves(h, "gate")),
    Weight("W_out", "num_experts expert_intermediate_size hidden_size",
           "Each expert's down projection (experts.down_proj)", lambda h: _halves(h, "out")),
    Weight("b_in", "", "None: the experts have no bias", lambda h: None),
    Weight("b_gate", "", "None: the experts have no bias", lambda h: None),
    Weight("b_out", "", "None: the experts have no bias", lambda h: None),
]}


@relation("expert_outputs[..., e, :] == (act_fn(expert_inputs[..., e, :] · W_gate[e]) · (expert_inputs[..., e, :] · "
          "W_in[e])) · W_out[e]: the per-expert weights, views of the fused gate_up_proj's halves and down_proj",
          proves="", reads="expert_inputs expert_outputs", tolerance=SUBBLOCK)
def _expert_weights(host, r):
    act = host._module.experts.act_fn
    x = r["expert_inputs"].double()  # [batch, seq, experts, hidden]
    gate = torch.einsum("bsed,edi->bsei", x, host.W_gate.double())
    up = torch.einsum("bsed,edi->bsei", x, host.W_in.double())
    out = torch.einsum("bsei,eid->bsed", act(gate) * up, host.W_out.double())
    return [(out, r["expert_outputs"])]


SigmoidMoE = host("SigmoidMoE", **EXPERT_WEIGHTS, values=[
    Value("router_logits", RouterLogits, "The router's logits, one per expert; read-only (the router returns them "
          "beside the scores it made from them: to reroute, edit router_scores)", child("router", element=1),
          view=View("tokens, read-only", _tokens_read, None)),
    Value("router_scores", RouterScores, "sigmoid of the top num_experts_per_tok logits, 0 elsewhere: what scales "
          "each expert's input", child("router", element=0), view=_TOKENS),
    Value("expert_inputs", PerExpert, "Each expert's input: the token scaled by its router score (zero for an "
          "unchosen expert)", child("experts", "input"), view=PER_EXPERT),
    Value("expert_outputs", PerExpert, "Each expert's output on its scaled input", child("experts"),
          view=PER_EXPERT),
    Value("routed_output", Residual, "The experts' outputs summed", op("sum_0"), view=_TOKENS),
    Value("shared_expert_output", Residual, _SHARED_OUTPUT, child("shared_experts"), view=_COPY),
    Value("mlp_output", Residual, "What the MLP adds to the residual stream", own("output", element=0),
          view=_TOKENS),
], HOST="model.layers[i].mlp", KIND="mixture MLP", RELATIONS=(_routing, _experts, _sum, _expert_weights,
                                                              SHARED_INPUT_RELATION))

# Llama4TextMLP is both the dense MLP and the shared expert: told apart by where they stand (a module class key
# would win over the paths, so that class has none)
ENVOYS = {hf.Llama4TextDecoderLayer: MoEBlock, hf.Llama4TextAttention: ChunkedAttention, hf.Llama4TextMoe: SigmoidMoE,
          "shared_expert": SharedMLP, "feed_forward": MLP}
ROOT = host("Llama4TextStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Llama4ForCausalLM)


def prepare(model: StandardModel) -> None:
    """Tell the shape check each MLP's own width: the dense MLPs are intermediate_size_mlp wide, the shared
    experts intermediate_size, one module class for both (Llama4TextMLP keeps no width of its own)."""
    for module in model._module.modules():
        if isinstance(module, hf.Llama4TextMLP):
            module.intermediate_size = module.gate_proj.out_features


def layer_types(model) -> list[str]:
    """chunked/global attention by config.layer_types, dense/mixture by config.moe_layers."""
    config = model.text_config
    attention = {"chunked_attention": "chunked", "full_attention": "global"}
    return [f"{attention[kind]}_{'moe' if i in config.moe_layers else 'dense'}"
            for i, kind in enumerate(config.layer_types)]


def required_paths(model: StandardModel) -> list[str]:
    moe = model.text_config.moe_layers[0]
    return [*TEXT_PATHS, f"layers.{moe}.mlp.router", f"layers.{moe}.mlp.experts", f"layers.{moe}.mlp.shared_experts"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"intermediate_size": config.intermediate_size_mlp, "num_experts": config.num_local_experts,
            "top_k": config.num_experts_per_tok, "expert_intermediate_size": config.intermediate_size}
