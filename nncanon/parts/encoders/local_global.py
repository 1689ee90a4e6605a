"""Local and global attention over a rotary (ModernBERT's, and its causal twin's): blocks of two kinds, each with
its own reach and its own rope base, on a pre-norm stack between an embeddings LayerNorm and a final norm.

    sliding_attention (local):  a query reads the keys within the window, before and after it (the encoder's) or
                                before it only (the decoder's); rope_parameters["sliding_attention"]["rope_theta"]
    full_attention (global):    every real key of the row (or of the prefix); rope_parameters["full_attention"]

The window is the module's ``sliding_window``: ModernBertAttention holds ``local_attention // 2 + 1`` and the
bidirectional sliding mask keeps the keys at distance ``|k - q| <= local_attention // 2``, so a key is read when
``|k - q| < sliding_window``, the causal window's ``k > q - sliding_window`` mirrored. The queries and keys are rotated
by the block kind's rotary (``rotated_projections``: the base of its layer type, positions ``0 .. seq-1``).

The stack is Llama's tree under other names, with one difference the block states: the first block has no norm
before its attention (``attn_norm`` is the identity there: the embeddings' LayerNorm has just normed the stream).
The root embeds, norms (``embed_layernorm``), runs the blocks, applies the final norm, then the prediction head's
transform (dense, activation, LayerNorm: ``head_transform``) and the decoder, tied to the word embeddings.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import Logits, Residual
from ...core.locators import child, own
from ...core.relations import first, pick, relation
from ...core.values import Value
from ..attention.softmax import (
    ATTENTION_RELATIONS,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    PATTERN_RELATIONS,
    Attention,
    causal_mask,
)
from ..blocks.decoder import BLOCK_RELATIONS, ROOT_RELATIONS, Block
from ..blocks.decoder import ROOT_VALUES as DECODER_ROOT_VALUES
from ..blocks.norms import final_norm_relation, formula, layer_norm
from .bidirectional import restated
from .embeddings import BERT_HEAD, tied_decoder_relation

# -- the attention: the window both ways, the rotary per block kind -----------------------------------------------


def window_mask(module: Any, padding: Any, queries: int, keys: int) -> Any:
    """[batch, 1, queries, keys] additive mask of a bidirectional block: padded keys masked and, on a local block
    (the module's ``sliding_window`` set), every key at distance ``sliding_window`` or more, on either side."""
    allowed = padding[:, None, None, -keys:].bool().expand(-1, 1, queries, -1)
    window = getattr(module, "sliding_window", None)
    if window:
        q = torch.arange(keys - queries, keys)[:, None]
        k = torch.arange(keys)[None, :]
        allowed = allowed & ((k - q).abs() < window)[None, None]
    return torch.where(allowed, 0.0, float("-inf"))


_BOTH_WAYS = ("the mask bidirectional: padded keys masked, and on a local block every key at distance sliding_window "
              "or more from its query, before or after it")
_attention = restated(PATTERN_RELATIONS[0], "attention_head_outputs == softmax(attention_queries · attention_keysᵀ · "
                      f"scaling + window mask) · attention_values, {_BOTH_WAYS}")
_pattern = restated(PATTERN_RELATIONS[1], "attention_scores == attention_queries · attention_keysᵀ · scaling + window "
                    f"mask (no causal mask); attention_probabilities == softmax(attention_scores), {_BOTH_WAYS}")


@relation("attention_probabilities > 0 at every real key within the window of its query (|k - q| < sliding_window on "
          "a local block, the whole row on a global one), after it as well as before it, and == 0 at every other key: "
          "the window runs both ways", proves="", reads="model.attention_mask attention_probabilities")
def _window_both_ways(host, r):
    """Counted, not compared in value: every later real key inside the window gets weight, and no key outside it or
    padded does."""
    padding, probabilities = r["model.attention_mask"].bool(), r["attention_probabilities"].double()
    seq = probabilities.shape[-1]
    window = getattr(host._module, "sliding_window", None) or seq + 1
    q, k = torch.arange(seq)[:, None], torch.arange(seq)[None, :]
    near = ((k - q).abs() < window)[None, None]
    real = padding[:, None, :, None] & padding[:, None, None, :]  # a real query's real keys
    later = (near & (k > q)[None, None] & real).expand_as(probabilities)
    outside = (padding[:, None, :, None] & ~(near & padding[:, None, None, :])).expand_as(probabilities)
    return [(torch.tensor(float(later.sum())), torch.tensor(float((probabilities[later] > 0).sum()))),
            (torch.zeros(int(outside.sum()), dtype=torch.float64), probabilities[outside])]


def rope_theta(module: Any) -> float:
    """The rope base of the module's block kind: ``rope_parameters[layer_type]["rope_theta"]``."""
    kind = module.config.layer_types[module.layer_idx]
    return float(module.config.rope_parameters[kind]["rope_theta"])


def rotate(x: Any, theta: float, positions: Any) -> Any:
    """``x`` [batch, heads, seq, head_dim] rotated in halves (rotate_half) at ``positions`` ([batch or 1, seq]), in
    float64."""
    x = x.double()
    dim = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = positions.double()[:, None, :, None] * inv_freq
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()
    half = dim // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin


def _positions(inputs: Any, new: int, past: int) -> Any:
    """The position_ids the attention is called with (the decoder's layers hand them on), else the columns past the
    cache, ``past .. past+new-1`` (the encoder numbers its columns and hands the attention only their rotary)."""
    given = inputs[1].get("position_ids") if isinstance(inputs, (tuple, list)) and len(inputs) > 1 else None
    return given if given is not None else torch.arange(past, past + new)[None]


def rotated_projections(split: Any, projections: str):
    """The relation that builds the queries, keys and values from the attention's input: ``split(host, x)`` gives the
    three in heads ([batch, heads, seq, head_dim]) before the rotary, ``projections`` says how in the text."""

    @relation(f"attention_queries, attention_keys == rotary(q), rotary(k) and attention_values == v, q, k, v == "
              f"{projections} in heads; rotary(x) = x · cos(p·θ) + rotate_half(x) · sin(p·θ) at the positions p the "
              "attention is called with (position_ids; the columns 0 .. seq-1 past the cached keys where none are "
              "passed), θ_j = rope_theta^(-2j/head_dim), rope_theta the block kind's (rope_parameters[layer_type]: "
              "the local blocks' base and the global blocks' differ)",
              proves="", reads="input inputs attention_queries attention_keys attention_values")
    def check(host, r):
        q, k, v = split(host, first(r["input"]))
        new = q.shape[-2]
        past = r["attention_keys"].shape[-2] - new  # a cache's keys come first at the call
        theta, positions = rope_theta(host._module), _positions(r["inputs"], new, past)
        return [(rotate(q, theta, positions), r["attention_queries"]),
                (rotate(k, theta, positions), r["attention_keys"][..., -new:, :]),
                (v, r["attention_values"][..., -new:, :])]

    return check


def _fused_thirds(host: Any, x: Any) -> tuple:
    """ModernBERT's Wqkv: one projection viewed as [..., 3, heads, head_dim], queries, keys, values in that order."""
    module = host._module
    qkv = module.Wqkv(x).view(*x.shape[:-1], 3, -1, module.head_dim)
    return tuple(part.transpose(1, 2) for part in qkv.unbind(-3))


#: the output projection (o_proj) last, as softmax's
_OUTPUT = pick(ATTENTION_RELATIONS, "attention_output == o_proj")
BIDIRECTIONAL_WINDOW_RELATIONS = (_attention, _pattern, _window_both_ways, HEAD_RESULTS_RELATION, *LINK_RELATIONS,
                                  _OUTPUT)

#: ModernBERT's attention: softmax attention over the bidirectional window mask, its scaling head_dim^-0.5 (passed to
#: the call: the module holds no ``scaling``), its queries and keys rotated by its block kind's base
LocalGlobalAttention = host("LocalGlobalAttention", Attention, RELATIONS=(
    *BIDIRECTIONAL_WINDOW_RELATIONS, rotated_projections(_fused_thirds, "Wqkv(input) split in thirds")),
    MASK=staticmethod(window_mask), SCALING=staticmethod(lambda module: module.head_dim ** -0.5))


def _separate(host: Any, x: Any) -> tuple:
    module = host._module
    return tuple(getattr(module, name)(x).view(*x.shape[:-1], -1, module.head_dim).transpose(1, 2)
                 for name in ("q_proj", "k_proj", "v_proj"))


#: the causal twin's attention (ModernBertDecoderAttention): softmax's causal relations, the window the module's
#: (``k > q - sliding_window`` on a local block: `softmax.causal_mask`), its own projections rotated per block kind
CausalLocalGlobalAttention = host("CausalLocalGlobalAttention", Attention, RELATIONS=(
    *ATTENTION_RELATIONS,
    rotated_projections(_separate, "q_proj(input), k_proj(input), v_proj(input)")), MASK=staticmethod(causal_mask))

# -- the block: pre-norm, no norm before the first block's attention ------------------------------------------------

_FORM = formula("· weight")


@relation(f"attention_norm_output == layernorm(layer_input) == what {{mixer}} is called with, layernorm(x) = {_FORM}, "
          "on every block but the first, whose input_layernorm is the identity (attention_norm_output == layer_input: "
          "the embeddings' LayerNorm has just normed it)", proves="attention_norm_output",
          reads="layer_input attention_norm_output {mixer}.input")
def _attention_norm(host, r):
    norm, x = host.input_layernorm._module, r["layer_input"]
    normed = x if isinstance(norm, torch.nn.Identity) else layer_norm(norm, x)
    return [(normed, r["attention_norm_output"]), (first(r["{mixer}.input"]), r["attention_norm_output"])]


@relation(f"mlp_input == mlp_norm_output == layernorm(layer_mid), layernorm(x) = {_FORM}",
          proves="mlp_norm_output mlp_input", reads="layer_mid mlp_norm_output mlp_input")
def _mlp_norm(host, r):
    return [(layer_norm(host.post_attention_layernorm._module, r["layer_mid"]), r["mlp_norm_output"]),
            (r["mlp_norm_output"], r["mlp_input"])]


#: Llama's block (the adds) with LayerNorms without bias, and none before the first block's attention
FirstNormlessBlock = host("FirstNormlessBlock", Block, values=[
    # the first block's identity hands the attention the stream tensor itself: an assignment writes into it, as an
    # in-place edit does, so both edit the attention's input and the stream the attention's output is added to
    Value("attention_norm_output", Residual, "The normed stream entering the attention; on the first block the "
          "stream itself (input_layernorm is the identity), so an edit there edits layer_input too",
          child("input_layernorm"), assign_in_place=True),
], RELATIONS=(
    pick(BLOCK_RELATIONS, "layer_input + {mixer}"), pick(BLOCK_RELATIONS, "layer_mid + mlp"), _attention_norm,
    _mlp_norm))

# -- the root: the embeddings' LayerNorm, the final norm, the head's transform and the tied decoder ----------------


@relation(f"layers[0].layer_input == embedding_norm_output == layernorm(token_embeddings), layernorm(x) = {_FORM}; "
          "token_embeddings == embed_tokens.weight[input_ids]", proves="token_embeddings embedding_norm_output",
          reads="input_ids token_embeddings embedding_norm_output layers[0].layer_input")
def _embeddings(host, r):
    return [(host.embed_tokens._module.weight[r["input_ids"]], r["token_embeddings"]),
            (layer_norm(host.embed_layernorm._module, r["token_embeddings"]), r["embedding_norm_output"]),
            (r["embedding_norm_output"], r["layers[0].layer_input"])]


@relation(f"head_transform_output == layernorm(act(head_transform.dense(final_norm_output))), layernorm(x) = {_FORM}: "
          "the prediction head's transform", proves="head_transform_output",
          reads="final_norm_output head_transform_output")
def _transform(host, r):
    head = host.head_transform._module
    return [(layer_norm(head.norm, head.act(head.dense(r["final_norm_output"]))), r["head_transform_output"])]


#: BERT's decoder, tied to the word embeddings with a bias of its own, at lm_head
_tied_decoder = tied_decoder_relation(BERT_HEAD)


def root_relations(mask: Any) -> tuple:
    """Llama's root relations with the embeddings', the LayerNorm's, the head's and ``mask`` (the padding's side) in
    place; no next token when ``mask`` is an encoder's."""
    keep = ("layers[i].layer_output ==", "logits == lm_head_output", "unembed(", "input_ids ==")
    shared = tuple(r for r in ROOT_RELATIONS if r.text.startswith(keep))
    return (_embeddings, final_norm_relation("· weight"), _transform, _tied_decoder, *shared, mask)


ROOT_VALUES = [
    Value("logits", Logits, "The logits the model returns: the decoder's scores at every position",
          own("output", attr="logits")),
    Value("token_embeddings", Residual, "The word embedding's output, before its LayerNorm", child("embed_tokens")),
    Value("embedding_norm_output", Residual, "The embeddings' LayerNorm: what enters the first block",
          child("embed_layernorm")),
    Value("final_norm_output", Residual, "The residual stream after the final norm, what the head's transform reads",
          child("norm")),
    Value("head_transform_output", Residual, "The prediction head's transform, LayerNorm(act(dense(x))): what the tied "
          "decoder reads", child("head_transform")),
    Value("lm_head_output", Logits, "The decoder's scores (tied to the word embeddings, plus its bias)",
          child("lm_head")),
    *(v for v in DECODER_ROOT_VALUES if v.name in ("input_ids", "attention_mask", "input_size")),
]


def before_the_head(model: Any, normed: Any) -> Any:
    """The lens: the prediction head's transform between the final norm and the tied decoder."""
    return model.head_transform(normed)
