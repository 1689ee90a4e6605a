"""Parts shared by decoder families: the model root, the block, attention, MLPs, mixtures.

Each host here is what Llama's tree has; a family subclasses the ones it changes (a gated
attention, a mixture with a shared expert) and says in its module which module class each
host wraps. Locators name children by their standard names (aliases resolve), so one
declaration serves every family whose RENAME maps its native names onto them.
"""

from __future__ import annotations

from ..hosts import Host, host
from ..layouts import (
    ExpertIndices,
    ExpertOutputs,
    ExpertWeights,
    HeadOutputs,
    Keys,
    Logits,
    Neurons,
    NextTokenProbs,
    Pattern,
    Queries,
    Residual,
    RouterLogits,
    Scalar,
    Tokens,
    Values,
)
from ..locators import FIRST, call, child, op, own
from ..relations import (
    ATTENTION_RELATIONS,
    BLOCK_RELATIONS,
    MLP_RELATIONS,
    MOE_RELATIONS,
    ROOT_RELATIONS,
    SHARED_MOE_RELATIONS,
)
from ..values import Condition, Value, never
from ..views import READ_ONLY, TOKENS, derived, heads

# -- conditions -----------------------------------------------------------------

EAGER = Condition(
    needs='attn_implementation="eager"',
    why="sdpa and flash compute the pattern inside one kernel, so no tensor holds it",
    holds=lambda model: model.attn_implementation == "eager",
)
ATTENTION_CALL = Condition(
    needs='attn_implementation "eager" or "sdpa"',
    why="the attention function's arguments and output are read in the layout eager and sdpa take",
    holds=lambda model: model.attn_implementation in ("eager", "sdpa"),
)
EXPERTS_MM = Condition(
    needs='experts_implementation "grouped_mm" (the default) or "batched_mm"',
    why="the eager experts loop over experts and never hold every slot's weighted output in one tensor",
    holds=lambda model: model.experts_implementation in ("grouped_mm", "batched_mm"),
)

# -- the model root ------------------------------------------------------------------

ROOT_VALUES = [
    Value("logits", Logits, "The logits the model returns, after anything it does past lm_head (a softcap, a scale)",
          own("output", attr="logits")),
    Value("token_embeddings", Residual, "The embedding module's output; layers[0].input is what enters the first block",
          child("embed_tokens")),
    Value("final_norm_output", Residual, "The residual stream after the final norm, what lm_head reads",
          child("norm")),
    Value("lm_head_output", Logits, "The head's logits before anything the model does past lm_head (a softcap, a scale)",
          child("lm_head")),
    Value("next_token_probs", NextTokenProbs, "The next-token distribution at the last position; derived, read-only",
          own("output", attr="logits"), view=derived("softmax of the last position", lambda x: x[:, -1].softmax(-1))),
    Value("input_ids", Tokens, "The token ids the model was called with", own("input", element="input_ids"),
          view=READ_ONLY),
    Value("attention_mask", Tokens, "The attention mask the model was called with; zeros are padding",
          own("input", element="attention_mask"), view=READ_ONLY),
    Value("input_size", Scalar, "[batch, seq] of the current call; read-only", own("input", element="input_ids"),
          view=derived("shape", lambda ids: list(ids.shape))),
]

# -- the block ---------------------------------------------------------------------

Block = host("Block", values=[
    Value("layer_input", Residual, "The residual stream entering the block", own("input")),
    Value("attention_norm_output", Residual, "The normed stream entering the attention", child("input_layernorm")),
    Value("layer_mid", Residual, "The residual stream after the attention add", child("post_attention_layernorm", "input"),
          assign_in_place=True),
    Value("mlp_norm_output", Residual, "The normed stream entering the MLP", child("post_attention_layernorm")),
    Value("mlp_input", Residual, "What the MLP is called with", child("mlp", "input")),
    Value("layer_output", Residual,
          "The residual stream leaving the block, a tensor even when the block returns a tuple",
          own("output", element=FIRST)),
], HOST="model.layers[i]", KIND="block", RELATIONS=BLOCK_RELATIONS, MIXERS=("self_attn", "linear_attn"))

# -- attention ---------------------------------------------------------------------

#: the call of the attention function, found by what it calls (`Call`): on 5.23 attention_interface_0 is the
#: get_interface(...) assignment, and a release that binds the name twice numbers the call _2
_CALL = call("attention_interface_1")

Attention = host("Attention", values=[
    Value("attention_queries", Queries, "The queries entering attention",
          op(_CALL, io="input", element=1), conditions=(ATTENTION_CALL,)),
    Value("attention_keys", Keys, "The keys entering attention", op(_CALL, io="input", element=2),
          conditions=(ATTENTION_CALL,)),
    Value("attention_values", Values, "The values entering attention", op(_CALL, io="input", element=3),
          conditions=(ATTENTION_CALL,)),
    Value("attention_scores", Pattern, "The attention scores entering the softmax, masked",
          op(_CALL, "nn_functional_softmax_0", io="input"), conditions=(EAGER,)),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=heads()),
    Value("attention_output", Residual, "What the attention adds to the residual stream", own("output", element=0)),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op(_CALL, "nn_functional_dropout_0"), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op(_CALL, element=0), conditions=(ATTENTION_CALL,)),
], HOST="model.layers[i].self_attn", KIND="attention", RELATIONS=ATTENTION_RELATIONS)

# -- MLPs -----------------------------------------------------------------------

_MLP_VALUES = [
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn")),
    Value("mlp_neurons", Neurons,
          "What the down projection receives: act(gate)·up on a gated MLP, the activation itself otherwise",
          child("down_proj", "input")),
    Value("mlp_output", Residual, "What the MLP adds to the residual stream", own("output")),
]

MLP = host("MLP", values=_MLP_VALUES, HOST="model.layers[i].mlp", KIND="dense MLP", RELATIONS=MLP_RELATIONS)

#: an MLP called on the mixture's token-flattened [batch*seq, hidden] rows (a shared expert)
TokenMLP = host("TokenMLP", values=[
    Value(v.name, v.layout, v.description, v.locator, view=TOKENS) for v in _MLP_VALUES
], HOST="model.layers[i].mlp.shared_experts", KIND="shared expert MLP", RELATIONS=MLP_RELATIONS)

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
], HOST="model.layers[i].mlp", KIND="mixture MLP", RELATIONS=MOE_RELATIONS)


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


def require_every_block_sparse(model, family: str) -> None:
    """Refuse a config that keeps some blocks dense (mlp_only_layers, decoder_sparse_step): the
    families that call this serve checkpoints whose every block is a mixture, as released."""
    from ..model import FamilyMismatch

    config = model.text_config
    dense = [i for i in range(config.num_hidden_layers)
             if i in config.mlp_only_layers or not config.num_experts or (i + 1) % config.decoder_sparse_step]
    if dense:
        raise FamilyMismatch(f"{family}: blocks {dense} have a dense MLP (mlp_only_layers, decoder_sparse_step); "
                             f"nncanon serves {family} checkpoints whose every block is a mixture, as released")

# -- a text-only decoder family (a causal LM whose text stack is model.model) ------------------

#: the causal LM's text stack, mounted at the root
TEXT_RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.norm": "norm"}

#: the standard paths every such family must resolve (StandardModel checks them at load)
TEXT_PATHS = ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
              "layers.0.post_attention_layernorm", "layers.0.mlp"]


def text_only(causal_cls: type, wrapper_prefix: str | None = None):
    """A family's ``build``: ``causal_cls`` (also ``build.causal_lm``) from a local checkpoint, with its tokenizer.

    With ``wrapper_prefix`` (``"model.language_model."``) a multimodal wrapper's checkpoint loads
    too, as its text stack alone (`_loading.text_model`).
    """
    from . import _loading

    def build(checkpoint, task: str, **hf_kwargs):
        _loading.check_task(task)
        if task != "text-generation":
            raise ValueError(f"task={task!r}: {causal_cls.__name__} is a text-only model; "
                             "load it with task='text-generation' (the default)")
        if wrapper_prefix is not None:
            module = _loading.text_model(checkpoint, causal_cls, wrapper_prefix, **hf_kwargs)
        else:
            module = _loading.pretrained(causal_cls, checkpoint, **hf_kwargs)
        return module, {"tokenizer": _loading.tokenizer(checkpoint)}

    build.causal_lm = causal_cls
    return build


def attention_layer_types(model) -> list[str]:
    """config.layer_types, or full_attention on every block for a config that has none."""
    config = model.text_config
    return list(getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers)


def moe_dim_sizes(model) -> dict[str, int]:
    config = model.text_config
    return {"num_experts": config.num_experts, "top_k": config.num_experts_per_tok}


def nothing_to_prepare(model) -> None:
    """``prepare`` of a family whose values need nothing installed beyond their locators."""


__all__ = ["Host", "ROOT_VALUES", "ROOT_RELATIONS", "Block", "Attention", "MLP", "TokenMLP", "MoE", "MoEBlock", "SharedMoE",
           "require_every_block_sparse", "EAGER",
           "ATTENTION_CALL", "EXPERTS_MM", "TEXT_RENAME", "TEXT_PATHS", "text_only", "attention_layer_types",
           "moe_dim_sizes", "nothing_to_prepare"]
