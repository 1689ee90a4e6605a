"""Gemma 2 (Gemma2ForCausalLM, model_type gemma2): sandwich norms, softcaps, alternating windows.

The block norms each sublayer twice: RMSNorm -> attention -> RMSNorm -> add, RMSNorm -> gated MLP
(GELU, tanh approximation) -> RMSNorm -> add. So what a sublayer adds to the stream is not its raw
output but its post-norm's (post_attention_layernorm, post_feedforward_layernorm), and the MLP reads
pre_feedforward_layernorm's output: ``layer_mid`` is read where the attention add's result goes on
(pre_feedforward_layernorm's input), and the two post-norm outputs are values of their own
(``attention_post_norm_output``, ``mlp_post_norm_output``). Every RMSNorm multiplies by
``(1 + weight)``, not ``weight``. The embedding module scales its rows by ``sqrt(hidden_size)``
(in transformers 5 inside embed_tokens, so ``token_embeddings`` is already scaled). The attention
scales scores by ``query_pre_attn_scalar ** -0.5``, softcaps them (``50 · tanh(s / 50)``) before the
mask is added (``attention_scores_uncapped`` is the score before the cap), and even-numbered
blocks attend within a sliding window (``layer_types`` alternates sliding_attention and
full_attention, from block 0). The logits are softcapped too (``30 · tanh(x / 30)``), so
``logits`` is not ``lm_head_output``. transformers runs Gemma 2 with eager attention only (sdpa has no
softcap); every value is read under it.
"""

from __future__ import annotations

import sys

from transformers.models.gemma2 import modeling_gemma2 as hf

from ..core.hosts import host
from ..core.layouts import Pattern
from ..core.locators import call, op
from ..core.model import StandardModel
from ..core.precision import SUBBLOCK
from ..core.relations import pick, relation
from ..core.values import Value
from ..parts.attention.softmax import (
    ATTENTION_RELATIONS,
    EAGER,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    Attention,
    causal_mask,
    mix,
    real_queries,
)
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.sandwich import SANDWICH_VALUES, sandwich
from ..research.norm_forms import norm_epsilon

FAMILY = "gemma2"
MODEL_TYPES = ("gemma2",)
RENAME = TEXT_RENAME

# -- the math the relations state, in float64, written out (not the modules' own forward) -------------


def gemma_rms(norm, x):
    """Gemma's RMSNorm: ``x / rms(x) · (1 + weight)``, in float64."""
    x = x.double()
    return x * (x.pow(2).mean(-1, keepdim=True) + norm_epsilon(norm)).rsqrt() * (1.0 + norm.weight.double())


def softcap(x, cap):
    """``cap · tanh(x / cap)``; no cap (None) leaves ``x`` as it is."""
    return x if cap is None else cap * (x / cap).tanh()


# -- the block: sandwich norms, gain 1 + weight --------------------------------------------------------

SANDWICH_RELATIONS = sandwich(gemma_rms, "(1 + {}.weight)").relations
SandwichBlock = host("SandwichBlock", Block, values=SANDWICH_VALUES, RELATIONS=SANDWICH_RELATIONS)

# -- attention: scores softcapped before the mask ------------------------------------------------------

_CALL = call("attention_interface_1")  # found by what it calls (`Call`)


def capped_pattern(module, queries, keys, padding):
    """(uncapped scores, scores, probabilities) ``[batch, heads, query, key]`` in float64: scaled by
    the module's scaling, softcapped by its attn_logit_softcapping, then masked (causal, within its
    sliding window if it has one)."""
    queries, keys = queries.double(), keys.double()
    keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    uncapped = queries @ keys.transpose(-1, -2) * module.scaling
    scores = softcap(uncapped, module.attn_logit_softcapping)
    scores = scores + causal_mask(module, padding, queries.shape[2], keys.shape[2]).double()
    return uncapped, scores, scores.softmax(-1)


@relation("attention_head_outputs == softmax(softcap(attention_queries · attention_keysᵀ · scaling) + causal mask) · "
          "attention_values, softcap(s) = attn_logit_softcapping · tanh(s / attn_logit_softcapping)",
          proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _capped_attention(host, r):
    padding = r["model.attention_mask"]
    _, _, probabilities = capped_pattern(host._module, r["attention_queries"], r["attention_keys"], padding)
    heads = mix(probabilities, r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_scores_uncapped == attention_queries · attention_keysᵀ · scaling; attention_scores == "
          "softcap(attention_scores_uncapped) + causal mask, the mask added after the cap (a masked score lies "
          "below -attn_logit_softcapping); attention_probabilities == softmax(attention_scores)",
          proves="attention_scores_uncapped attention_scores attention_probabilities",
          reads="model.attention_mask attention_queries attention_keys attention_scores_uncapped attention_scores "
                "attention_probabilities",
          tolerance=SUBBLOCK)
def _capped_scores(host, r):
    import torch

    module, padding = host._module, r["model.attention_mask"]
    uncapped, scores, probabilities = capped_pattern(module, r["attention_queries"], r["attention_keys"], padding)
    read_scores = r["attention_scores"].double()
    allowed = torch.isfinite(scores)
    # transformers masks with the dtype's minimum: a masked score the cap had seen would be -cap
    cap = module.attn_logit_softcapping
    below = (read_scores[~allowed] < -cap).double() if cap is not None else torch.ones(int((~allowed).sum()))
    return [(uncapped, r["attention_scores_uncapped"].double()),
            (scores[allowed], read_scores[allowed]),
            (torch.ones_like(below), below),
            (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]


CAPPED_ATTENTION_RELATIONS = (_capped_attention, _capped_scores, HEAD_RESULTS_RELATION, *LINK_RELATIONS,
                              ATTENTION_RELATIONS[-1])  # o_proj as everywhere
assert ATTENTION_RELATIONS[-1].text == "attention_output == o_proj(attention_premix)"

SoftcappedAttention = host("SoftcappedAttention", Attention, values=[
    Value("attention_scores_uncapped", Pattern,
          "The attention scores before the softcap and the mask: queries · keysᵀ · scaling",
          op(_CALL, "attn_weights_0"), conditions=(EAGER,)),
    Value("attention_scores", Pattern, "The attention scores entering the softmax: softcapped, then masked",
          op(_CALL, "nn_functional_softmax_0", io="input"), conditions=(EAGER,)),
], RELATIONS=CAPPED_ATTENTION_RELATIONS)

# -- the root: a scaled embedding, a softcapped head -----------------------------------------------------


@relation("layers[0].layer_input == token_embeddings == embed_tokens.weight[input_ids] · sqrt(hidden_size)",
          proves="token_embeddings", reads="input_ids token_embeddings layers[0].layer_input")
def _scaled_embeddings(host, r):
    table = host.embed_tokens._module.weight.double()
    return [(table[r["input_ids"]] * host.text_config.hidden_size ** 0.5, r["token_embeddings"]),
            (r["token_embeddings"], r["layers[0].layer_input"])]


@relation("final_norm_output == rms(layers[-1].layer_output) · (1 + norm.weight)", proves="final_norm_output",
          reads="layers[-1].layer_output final_norm_output")
def _final_norm(host, r):
    return [(gemma_rms(host.norm._module, r["layers[-1].layer_output"]), r["final_norm_output"])]


@relation("logits == final_logit_softcapping · tanh(lm_head_output / final_logit_softcapping)", proves="logits",
          reads="lm_head_output logits")
def _capped_logits(host, r):
    return [(softcap(r["lm_head_output"].double(), host.text_config.final_logit_softcapping), r["logits"])]


ROOT_RELATIONS_GEMMA2 = (pick(ROOT_RELATIONS, "layers[i].layer_output"), _scaled_embeddings, _final_norm, pick(ROOT_RELATIONS, "lm_head_output"),
                         _capped_logits, pick(ROOT_RELATIONS, "unembed("), pick(ROOT_RELATIONS, "next_token_probs"), pick(ROOT_RELATIONS, "input_ids"), pick(ROOT_RELATIONS, "attention_mask"))

ENVOYS = {hf.Gemma2DecoderLayer: SandwichBlock, hf.Gemma2Attention: SoftcappedAttention, hf.Gemma2MLP: MLP}
ROOT = host("Gemma2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_GEMMA2,
            family_module=sys.modules[__name__])

build = text_only(hf.Gemma2ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): the final logit softcap, as Gemma2ForCausalLM applies it."""
    return softcap(logits, model.text_config.final_logit_softcapping)


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.pre_feedforward_layernorm", "layers.0.post_feedforward_layernorm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
