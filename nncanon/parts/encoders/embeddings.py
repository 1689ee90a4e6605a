"""An encoder's root: the embeddings BERT sums and norms before the first block, the masked-LM head after the
last, and the inputs it is called with (ids, a right-padded mask, token types).

    x0     = LayerNorm(word[input_ids] + token_type[token_type_ids] + position[p])       the embeddings
    logits = decoder(LayerNorm(act(dense(layers[-1].layer_output))))                     the MLM head

The three tables are mounted as ``embed_tokens``, ``embed_token_types`` and ``embed_positions``, the embeddings'
LayerNorm as ``embed_layernorm``; the head's transform (dense, activation, LayerNorm) as ``head_transform`` and its
decoder, tied to the word embeddings with a bias of its own, as ``lm_head``. There is no final norm: each block
ends in one, and the transform's LayerNorm belongs to the head (the lens applies it: `before_the_head`).

``positions(host, ids, mask)`` gives the position table's row of each token: BERT's count from the first column
(the padding is on the right, so a row's real tokens start at 0); RoBERTa's start after its padding row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...core.layouts import Logits, Residual, Scalar, Tokens, layout
from ...core.locators import child, own
from ...core.relations import relation
from ...core.values import Unavailable, Value, never
from ...core.views import READ_ONLY, View, derived
from ..blocks.decoder import ROOT_RELATIONS
from ..blocks.norms import formula, layer_norm

_FORM = formula("· weight + bias")

#: one row per position, shared by every row of the batch: the model numbers the positions itself
PositionRows = layout("PositionRows", "seq hidden_size")


def _one_table_row(host: Any, x: Any) -> Any:
    if x.shape[0] != 1:
        raise Unavailable("model.position_embeddings is unavailable: the call passed position_ids per row, so the "
                          "positions are not one row shared by the batch; read embed_positions.output")
    return x[0]  # a view: an in-place edit lands in the model's tensor


#: the shared rows without their batch axis of 1, and back
SHARED_ROWS = View("shared rows", _one_table_row, lambda host, x, current: x[None])


def first_column_positions(host: Any, ids: Any, mask: Any) -> Any:
    """BERT's positions: ``0 .. seq-1`` on every row (its ``position_ids`` buffer), padded or not."""
    return torch.arange(ids.shape[1])[None].expand(ids.shape[0], -1)


def _types(r: dict) -> Any:
    """The token types the call passed, or zeros (the model's default when none are passed)."""
    types = r["token_type_ids"]
    return torch.zeros_like(r["input_ids"]) if types is None else types


def embeddings_relation(positions: Callable = first_column_positions, rows: str = "p, counted from 0 at the first "
                        "column (padding is on the right)"):
    """The root relation of the summed and normed embeddings; ``positions`` gives each token's table row."""

    @relation(f"layers[0].layer_input == embedding_norm_output == layernorm(token_embeddings + token_type_embeddings + "
              f"position_embeddings), layernorm(x) = {_FORM}; token_embeddings == embed_tokens.weight[input_ids]; "
              "token_type_embeddings == embed_token_types.weight[token_type_ids] (0 where none are passed); "
              f"position_embeddings == embed_positions.weight[{rows}]",
              proves="token_embeddings token_type_embeddings position_embeddings embedding_norm_output",
              reads="input_ids attention_mask token_type_ids token_embeddings token_type_embeddings "
                    "position_embeddings embedding_norm_output layers[0].layer_input")
    def check(host, r):
        ids, mask = r["input_ids"], r["attention_mask"]
        mask = torch.ones_like(ids) if mask is None else mask
        table = host.embed_positions._module.weight
        summed = r["token_embeddings"] + r["token_type_embeddings"] + r["position_embeddings"]  # rows broadcast
        return [(layer_norm(host.embed_layernorm._module, summed), r["embedding_norm_output"]),
                (r["embedding_norm_output"], r["layers[0].layer_input"]),
                (host.embed_tokens._module.weight[ids], r["token_embeddings"]),
                (host.embed_token_types._module.weight[_types(r)], r["token_type_embeddings"]),
                (table[positions(host, ids, mask)], r["position_embeddings"].expand(ids.shape[0], -1, -1))]

    return check


@relation("head_transform_output == layernorm(act(head_transform.dense(layers[-1].layer_output))), layernorm(x) = "
          f"{_FORM}: the MLM head's transform", proves="head_transform_output",
          reads="layers[-1].layer_output head_transform_output")
def _transform(host, r):
    module = host.head_transform._module
    return [(layer_norm(module.LayerNorm, module.transform_act_fn(module.dense(r["layers[-1].layer_output"]))),
             r["head_transform_output"])]


@relation("lm_head_output == head_transform_output @ embed_tokens.weightᵀ + lm_head.bias: the decoder tied to the "
          "word embeddings, with a bias of its own", proves="lm_head_output",
          reads="head_transform_output lm_head_output")
def _tied_decoder(host, r):
    decoder, table = host.lm_head._module, host.embed_tokens._module.weight
    tied = torch.tensor(float(decoder.weight.data_ptr() == table.data_ptr()))
    return [(host.lm_head._module(r["head_transform_output"]), r["lm_head_output"]), (torch.tensor(1.0), tied)]


@relation("token_type_ids == what embed_token_types embeds (none passed: the model's zeros)",
          proves="token_type_ids", reads="embed_token_types.input token_type_ids input_ids")
def _token_types(host, r):
    return [(r["embed_token_types.input"], _types(r))]


@relation("attention_mask == the batch's mask: 0 exactly on the right padding (the tokenizer pads on the right)",
          proves="attention_mask", reads="input_ids attention_mask")
def _right_padding(host, r):
    mask, ids = r["attention_mask"], r["input_ids"]
    pad = host.tokenizer.pad_token_id
    expected = torch.ones_like(mask)
    for row in range(mask.shape[0]):
        padding = int((ids[row].flip(0) == pad).cumprod(0).sum())
        expected[row, ids.shape[1] - padding:] = 0
    return [(expected, mask)]


def encoder_root_relations(positions_relation=None) -> tuple:
    """The decoder's root relations that hold on an encoder (the stack, the logits, the lens, the ids), with the
    embeddings', the head's, the token types' and the right padding's in place of the rest."""
    keep = ("layers[i].layer_output ==", "logits == lm_head_output", "unembed(", "input_ids ==")
    shared = tuple(r for r in ROOT_RELATIONS if r.text.startswith(keep))
    return (positions_relation or embeddings_relation(), _transform, _tied_decoder, *shared, _token_types,
            _right_padding)


ENCODER_ROOT_VALUES = [
    Value("logits", Logits, "The logits the model returns: the MLM head's scores at every position",
          own("output", attr="logits")),
    Value("token_embeddings", Residual, "The word embedding's output, before the sum", child("embed_tokens")),
    Value("token_type_embeddings", Residual, "The token type embedding's output (segment A 0, B 1)",
          child("embed_token_types")),
    Value("position_embeddings", PositionRows, "The learned position embedding's output: one row per position, "
          "added to every row of the batch (the model numbers the positions itself)", child("embed_positions"),
          view=SHARED_ROWS),
    Value("embedding_norm_output", Residual, "The LayerNorm of the three embeddings' sum: what enters the first block",
          child("embed_layernorm")),
    Value("final_norm_output", Residual, "The residual stream after the final norm", child("embed_layernorm"),
          conditions=(never("an encoder's blocks are post-norm: each ends in its own LayerNorm, and there is no "
                            "final norm (the MLM head's transform has one: head_transform_output)"),)),
    Value("head_transform_output", Residual, "The MLM head's transform, LayerNorm(act(dense(x))): what the tied "
          "decoder reads", child("head_transform")),
    Value("lm_head_output", Logits, "The decoder's scores (tied to the word embeddings, plus its bias)",
          child("lm_head")),
    Value("input_ids", Tokens, "The token ids the model was called with", own("input", element="input_ids"),
          view=READ_ONLY),
    Value("attention_mask", Tokens, "The attention mask the model was called with; zeros are padding, on the right",
          own("input", element="attention_mask"), view=READ_ONLY),
    Value("token_type_ids", Tokens, "The token types the model was called with (0 the first text, 1 the pair's "
          "second); None when the call passed none", own("input", element="token_type_ids"), view=READ_ONLY),
    Value("input_size", Scalar, "[batch, seq] of the current call; read-only", own("input", element="input_ids"),
          view=derived("shape", lambda ids: list(ids.shape))),
]

#: the encoder's root mounts (native paths under the backbone ``prefix``, BERT's ``bert.``)


def encoder_rename(prefix: str) -> dict[str, str]:
    """The embeddings' and the stack's mounts under ``prefix`` (``bert``, ``roberta``, ``electra``)."""
    return {f"{prefix}.embeddings.word_embeddings": "embed_tokens",
            f"{prefix}.embeddings.token_type_embeddings": "embed_token_types",
            f"{prefix}.embeddings.position_embeddings": "embed_positions",
            f"{prefix}.embeddings.LayerNorm": "embed_layernorm",
            f"{prefix}.encoder.layer": "layers",
            "attention": "self_attn"}


def before_the_head(model: Any, normed: Any) -> Any:
    """The lens: the MLM head's transform between the last block and the tied decoder (there is no final norm)."""
    return model.head_transform(normed)
