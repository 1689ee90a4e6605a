"""Mixtures of experts: a softmax top-k router over fused experts, with or without a gated shared expert.

The routing relation recomputes the router's choice from its weight (renormalised or not, as the
family's router does); the slot relation proves each routing slot's weighted output by their sum.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import ExpertIndices, ExpertOutputs, ExpertWeights, Neurons, Residual, RouterLogits
from ...core.locators import child, op
from ...core.relations import Relation, first, relation, rows
from ...core.values import Condition, Value, never
from ...core.views import TOKENS
from ...research.weights import EXPERTS as EXPERT_WEIGHTS
from .decoder import Block
from .mlp import MLP

EXPERTS_MM = Condition(
    needs='experts_implementation "grouped_mm" (the default) or "batched_mm"',
    why="the eager experts loop over experts and never hold every slot's weighted output in one tensor",
    holds=lambda model: model.experts_implementation in ("grouped_mm", "batched_mm"),
)

def _router(host) -> Any:
    module = host._module
    return module.gate if hasattr(module, "gate") else module.router


def router_weight(router) -> torch.Tensor:
    """The router's [num_experts, hidden] matrix: its own parameter, or its linear's (Hunyuan's gate keeps it in a
    bias-free ``wg``, in float32; AFMoE's router in ``gate``)."""
    if hasattr(router, "weight"):
        return router.weight
    return router.wg.weight if hasattr(router, "wg") else router.gate.weight


def _chosen(r, logits: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor) -> list:
    """The checks of a routing recomputed as (logits, chosen experts, their weights) against the values read. Equal
    scores may be ordered either way: sets of experts are compared, and weights by expert."""
    read_indices = rows(r["expert_indices"]).long()
    by_expert = torch.zeros_like(logits, dtype=weights.dtype).scatter(-1, indices, weights)
    read_by_expert = torch.zeros_like(by_expert).scatter(-1, read_indices, rows(r["expert_weights"]).to(weights.dtype))
    return [(logits, rows(r["router_logits"])), (indices.sort(-1).values, read_indices.sort(-1).values),
            (by_expert, read_by_expert)]


def routing(renormalised: bool | None) -> Relation:
    """The router's meaning: logits by its weight, the top-k of their softmax, and those probabilities
    as the weights, renormalised over the chosen experts (``True``), not (``False``), or as the router's
    ``norm_topk_prob`` says (``None``)."""
    how = {True: "renormalised over the chosen experts", False: "not renormalised",
           None: "renormalised when norm_topk_prob"}[renormalised]

    @relation("router_logits == router.weight · input; expert_indices == top_k(softmax(router_logits)); "
              f"expert_weights == those probabilities, {how}", proves="router_logits expert_indices expert_weights",
              reads="input router_logits expert_indices expert_weights")
    def check(host, r):
        router = _router(host)
        logits = rows(first(r["input"])).to(router_weight(router).dtype) @ router_weight(router).T
        probs = logits.float().softmax(-1)
        top, indices = torch.topk(probs, router.top_k, dim=-1)
        if renormalised or (renormalised is None and getattr(router, "norm_topk_prob", False)):
            top = top / top.sum(-1, keepdim=True)
        return _chosen(r, logits, indices, top)

    return check


def _correction_bias(router) -> torch.Tensor:
    """The per-expert bias the choice adds (ERNIE 4.5 keeps it in the router's moe_statics)."""
    holder = getattr(router, "moe_statics", router)
    return holder.e_score_correction_bias.reshape(-1)


@relation("router_logits == router.weight · input; expert_indices == top_k(softmax(router_logits) + "
          "e_score_correction_bias): the bias moves the choice only; expert_weights == the chosen probabilities, "
          "renormalised over the chosen experts (their sum at least moe_norm_min)",
          proves="router_logits expert_indices expert_weights",
          reads="input router_logits expert_indices expert_weights")
def _corrected_routing(host, r):
    router = _router(host)
    logits = rows(first(r["input"])).float() @ router_weight(router).float().T
    probs = logits.softmax(-1)
    indices = torch.topk(probs + _correction_bias(router).float(), router.top_k, dim=-1).indices
    top = probs.gather(-1, indices)
    top = top / top.sum(-1, keepdim=True).clamp(min=router.norm_min)
    return _chosen(r, logits, indices, top)


#: a softmax router whose choice adds a per-expert correction bias and whose weights are the chosen probabilities
#: renormalised (ERNIE 4.5's)
CORRECTED_ROUTING = _corrected_routing


def _sparsemixer_pick(logits: torch.Tensor, scores: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The best of ``scores`` and its softmax weight over the logits within 2·eps (relative) of it."""
    best, index = scores.max(-1, keepdim=True)
    near = ((best - logits) / logits.abs().clamp(min=best)) <= 2 * eps
    return index, scores.masked_fill(~near, float("-inf")).softmax(-1).gather(-1, index)


@relation("router_logits == router.weight · input; expert_indices == the largest router logit, then the largest of "
          "the rest; expert_weights == each one's softmax over the logits within 2 · router_jitter_noise (relative) "
          "of it, the first one masked out for the second (sparsemixer, as the model routes at inference)",
          proves="router_logits expert_indices expert_weights",
          reads="input router_logits expert_indices expert_weights")
def _sparsemixer_routing(host, r):
    router = _router(host)
    logits = rows(first(r["input"])) @ router_weight(router).T
    first_index, first_weight = _sparsemixer_pick(logits, logits, router.router_jitter_noise)
    rest = logits.scatter(-1, first_index, float("-inf"))
    second_index, second_weight = _sparsemixer_pick(logits, rest, router.router_jitter_noise)
    indices, weights = torch.cat([first_index, second_index], -1), torch.cat([first_weight, second_weight], -1)
    return [(logits, rows(r["router_logits"])), (indices, rows(r["expert_indices"]).long()),
            (weights, rows(r["expert_weights"]))]


#: PhiMoE's sparsemixer at inference: two experts, each weighted by a softmax over the logits near its own
SPARSEMIXER_ROUTING = _sparsemixer_routing


@relation("router_logits == router.weight · input; scores = softmax(router_logits); expert_indices == the top_k "
          "scores (topk_method greedy), or the top_k within the topk_group of n_group groups whose best score is "
          "highest (group_limited_greedy); expert_weights == the chosen scores · routed_scaling_factor, not "
          "renormalised", proves="router_logits expert_indices expert_weights",
          reads="input router_logits expert_indices expert_weights")
def _group_limited_routing(host, r):
    """DeepSeek-V2's router: softmax scores, as Mixtral's, but optionally limited to the best groups of experts (a
    group ranked by its best score, where V3 ranks by the sum of its two best sigmoid scores) and scaled, never
    renormalised."""
    router = _router(host)
    logits = rows(first(r["input"])).float() @ router.weight.float().T
    scores = logits.softmax(-1)
    choice = scores
    if router.topk_method == "group_limited_greedy":
        grouped = scores.unflatten(-1, (router.num_group, -1))
        best = grouped.max(-1).values.topk(router.topk_group, dim=-1).indices
        keep = torch.zeros_like(grouped[..., 0]).scatter(-1, best, 1.0).bool()
        choice = scores.masked_fill(~keep.repeat_interleave(grouped.shape[-1], -1), 0.0)
    weights, indices = choice.topk(router.top_k, dim=-1)
    weights = weights * router.routed_scaling_factor
    read_indices = rows(r["expert_indices"]).long()
    by_expert = torch.zeros_like(scores).scatter(-1, indices, weights)
    read_by_expert = torch.zeros_like(scores).scatter(-1, read_indices, rows(r["expert_weights"]).float())
    return [(logits, rows(r["router_logits"])), (indices.sort(-1).values, read_indices.sort(-1).values),
            (by_expert, read_by_expert)]


GROUP_LIMITED_ROUTING = _group_limited_routing


def biased_sigmoid_routing(bias: str, scale: str | None = None) -> Relation:
    """A sigmoid router whose choice adds a per-expert bias held by the mixture (``bias``, the mixture's buffer or
    parameter it hands the router's call) and whose weights are the chosen scores renormalised, times the router's
    ``scale`` when it has one: DeepSeek-V3's scoring without groups (AFMoE's expert_bias and route_scale, MiniMax-M2's
    e_score_correction_bias, unscaled)."""
    scaled = f", · {scale}" if scale else ""

    @relation(f"router_logits == router.weight · input; scores = sigmoid(router_logits); expert_indices == "
              f"top_k(scores + {bias}): the bias moves the choice only; expert_weights == the chosen scores renormalised "
              f"over the chosen experts{scaled}", proves="router_logits expert_indices expert_weights",
              reads="input router_logits expert_indices expert_weights")
    def check(host, r):
        router = _router(host)
        # the logits in the router's dtype, as its linear makes them, then float32: in a half dtype the top-k chooses
        # among the rounded scores, so a recompute from unrounded ones would choose among others
        weight = router_weight(router)
        logits = (rows(first(r["input"])).to(weight.dtype) @ weight.T).float()
        scores = logits.sigmoid()
        indices = torch.topk(scores + getattr(host._module, bias).float(), router.top_k, dim=-1).indices
        top = scores.gather(-1, indices)
        top = top / (top.sum(-1, keepdim=True) + 1e-20) * (getattr(router, scale) if scale else 1.0)
        return _chosen(r, logits, indices, top)

    return check


def chosen_softmax_routing(bias: bool) -> Relation:
    """A router that picks the top k of its raw logits and weights them by a softmax over those chosen logits alone
    (gpt-oss's, whose router linear has a bias; Aria's, whose has none): the same weights as a softmax over every
    expert renormalised over the chosen ones."""
    plus_bias = " + router.bias" if bias else ""

    @relation(f"router_logits == router.weight · input{plus_bias}; expert_indices == top_k(router_logits); "
              "expert_weights == softmax over the chosen logits", proves="router_logits expert_indices expert_weights",
              reads="input router_logits expert_indices expert_weights")
    def check(host, r):
        router = _router(host)
        logits = rows(first(r["input"])).double() @ router.weight.double().T
        if bias:
            logits = logits + router.bias.double()
        top, indices = torch.topk(logits, router.top_k, dim=-1)
        return _chosen(r, logits, indices, top.softmax(-1))

    return check


@relation("routed_output == Σ over routing slots of expert_outputs", proves="expert_outputs routed_output",
          reads="expert_outputs routed_output")
def _slots(host, r):
    outputs = r["expert_outputs"]
    return [(rows(outputs.sum(-2)), rows(r["routed_output"]))]


@relation("mlp_output == routed_output (no shared expert)", proves="routed_output", reads="routed_output mlp_output")
def _routed_is_all(host, r):
    return [(rows(r["routed_output"]), rows(r["mlp_output"]))]


@relation("mlp_output == routed_output + shared_expert_output; shared_expert_output == "
          "sigmoid(shared_expert_gate(input)) · shared_experts.mlp_output", proves="routed_output shared_expert_output",
          reads="input routed_output shared_experts.mlp_output shared_expert_output mlp_output")
def _routed_plus_shared(host, r):
    gate = torch.sigmoid(host._module.shared_expert_gate(rows(first(r["input"]))))
    return [(rows(r["routed_output"]) + rows(r["shared_expert_output"]), rows(r["mlp_output"])),
            (gate * rows(r["shared_experts.mlp_output"]), rows(r["shared_expert_output"]))]


@relation("mlp_output == routed_output + shared_expert_output; shared_expert_output == shared_experts.mlp_output "
          "(ungated)", proves="routed_output shared_expert_output",
          reads="routed_output shared_experts.mlp_output shared_expert_output mlp_output")
def _routed_plus_ungated_shared(host, r):
    return [(rows(r["routed_output"]) + rows(r["shared_expert_output"]), rows(r["mlp_output"])),
            (r["shared_experts.mlp_output"], r["shared_expert_output"])]


@relation("shared_experts.input == input: the shared expert reads the rows the router reads",
          proves="", reads="input shared_experts.input")
def _shared_input(host, r):
    """The link from the mixture's input to its shared expert's (the proof chain, generator/facts/chain.py): the
    forward hands the shared expert the hidden states it routes, nothing in between."""
    return [(rows(first(r["input"])), rows(first(r["shared_experts.input"])))]


MOE_RELATIONS = (routing(None), _slots, _routed_is_all)
SHARED_MOE_RELATIONS = (routing(None), _slots, _routed_plus_shared, _shared_input)
SHARED_INPUT_RELATION = _shared_input
#: the shared expert added as it is, no gate (DeepSeek-V3, GLM-4.5, Hunyuan-A13B)
UNGATED_SHARED_RELATION = _routed_plus_ungated_shared

_NO_ACT = never("a mixture has no activation of its own: its experts are fused in mlp.experts "
                "(a shared expert's is mlp.shared_experts.mlp_activation)")

#: a softmax top-k mixture whose router is `router` (returning logits, weights, indices)
#: and whose fused `experts` take (rows, indices, weights)
MoE = host("MoE", MLP, values=[
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn"), conditions=(_NO_ACT,)),
    Value("mlp_neurons", Neurons,
          "What the down projection receives: act(gate)·up on a gated MLP, the activation itself otherwise",
          child("down_proj", "input"), conditions=(_NO_ACT,)),
    Value("router_logits", RouterLogits, "The router's logits, one per expert, before the scoring",
          op("F_linear_0", module="router"), view=TOKENS),
    Value("expert_weights", ExpertWeights, "The weight each selected expert's output is scaled by",
          child("experts", "input", element=2), view=TOKENS),
    Value("expert_indices", ExpertIndices, "The expert each routing slot sends the token to",
          child("experts", "input", element=1), view=TOKENS),
    Value("expert_outputs", ExpertOutputs, "Each routing slot's weighted expert output",
          op("experts_forward_1", "weighted_out_view_0", module="experts"), view=TOKENS,
          conditions=(EXPERTS_MM,)),
    Value("routed_output", Residual, "The routed experts' combined output", child("experts"), view=TOKENS),
], HOST="model.layers[i].mlp", KIND="mixture MLP", RELATIONS=MOE_RELATIONS,
    **EXPERT_WEIGHTS)  # per-expert W_in, W_gate, W_out (nncanon.weights)


class _TopK:
    @property
    def top_k(self) -> int:
        """How many experts each token is routed to (num_experts_per_tok)."""
        return self._module.gate.top_k if hasattr(self._module, "gate") else self._module.router.top_k

    @property
    def num_experts(self) -> int:
        return self._module.experts.num_experts


MoE = type("MoE", (_TopK, MoE), {"HOST": "model.layers[i].mlp"})

#: a block whose MLP is a mixture: it records the [batch, seq] its token-flattened values unflatten to
MoEBlock = host("MoEBlock", Block, TRACKS_TOKENS=True)

#: a mixture whose shared expert (shared_experts, a TokenMLP) is scaled by a sigmoid gate per token
#: (Qwen3-Next, Qwen3.5-MoE): the scaled product is the forward's second shared_expert_output
SharedMoE = host("SharedMoE", MoE, values=[
    Value("shared_expert_output", Residual, "The shared expert's output",
          op("shared_expert_output_1"), view=TOKENS),
], RELATIONS=SHARED_MOE_RELATIONS)


#: a mixture whose router (``router``, its linear ``router.gate``) scores by the sigmoid, its choice biased by the
#: mixture's ``expert_bias``, the weights renormalised and scaled, and whose shared expert reads the token rows
#: flattened and is added ungated (AFMoE)
BiasedSigmoidMoE = host("BiasedSigmoidMoE", MoE, values=[
    Value("router_logits", RouterLogits, "The router's logits, one per expert, before the scoring",
          child("router.gate", shown="router.gate"), view=TOKENS),
    Value("shared_expert_output", Residual, "The shared expert's output, added ungated", child("shared_experts"),
          view=TOKENS),
], RELATIONS=(biased_sigmoid_routing("expert_bias", "route_scale"), _slots, _routed_plus_ungated_shared,
               _shared_input))


def attention_and_mlp_kinds(attention_kinds: list[str], mixture: list[bool]) -> list[str]:
    """``<attention>_<mlp>`` per block, for a stack whose sliding/full pattern and dense/mixture pattern are
    independent (EXAONE MoE, AFMoE): ``sliding`` or ``full``, then ``dense`` or ``mixture``."""
    short = {"sliding_attention": "sliding", "full_attention": "full"}
    return [f"{short[kind]}_{'mixture' if sparse else 'dense'}"
            for kind, sparse in zip(attention_kinds, mixture, strict=True)]


def require_every_block_sparse(model, family: str) -> None:
    """Refuse a config that keeps some blocks dense (mlp_only_layers, decoder_sparse_step): the
    families that call this serve checkpoints whose every block is a mixture, as released."""
    from ...core.model import FamilyMismatch

    config = model.text_config
    dense = [i for i in range(config.num_hidden_layers)
             if i in config.mlp_only_layers or not config.num_experts or (i + 1) % config.decoder_sparse_step]
    if dense:
        raise FamilyMismatch(f"{family}: blocks {dense} have a dense MLP (mlp_only_layers, decoder_sparse_step); "
                             f"nncanon serves {family} checkpoints whose every block is a mixture, as released")

def moe_dim_sizes(model) -> dict[str, int]:
    config = model.text_config
    return {"num_experts": config.num_experts, "top_k": config.num_experts_per_tok}


def expert_dims(experts: str = "num_experts", top_k: str = "num_experts_per_tok"):
    """``dim_sizes`` of a stack of mixtures (and dense MLPs) whose config names its expert count ``experts`` and the
    experts per token ``top_k``: those and intermediate_size."""
    def dim_sizes(model) -> dict[str, int]:
        config = model.text_config
        return {"intermediate_size": config.intermediate_size, "num_experts": getattr(config, experts),
                "top_k": getattr(config, top_k)}

    return dim_sizes
