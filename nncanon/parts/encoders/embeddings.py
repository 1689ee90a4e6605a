"""An encoder's root: the embeddings BERT sums and norms before the first block, the masked-LM head after the
last, and the inputs it is called with (ids, a right-padded mask, token types).

    x0     = LayerNorm(word[input_ids] + token_type[token_type_ids] + position[p])       the embeddings
    logits = decoder(LayerNorm(act(dense(layers[-1].layer_output))))                     the MLM head

The three tables are mounted as ``embed_tokens``, ``embed_token_types`` and ``embed_positions``, the embeddings'
LayerNorm as ``embed_layernorm``; the head's transform (dense, activation, LayerNorm) as ``head_transform`` and its
decoder, tied to the word embeddings with a bias of its own, as ``lm_head``. There is no final norm: each block
ends in one, and the transform's LayerNorm belongs to the head (the lens applies it: `before_the_head`).

``positions(host, ids, mask)`` gives the position table's row of each token: BERT's count from the first column
(the padding is on the right, so a row's real tokens start at 0); RoBERTa's start after its padding row
(`after_the_padding_row`), numbered per row, so its ``position_embeddings`` are per row too (``per_row_positions``),
and its tokenizer passes no token types: the model embeds its one row's zeros (``one_type``).

Where the head keeps its parts differs by family (`MlmHead`): BERT's transform is a module of its own
(``cls.predictions.transform``), RoBERTa's dense and LayerNorm sit beside the decoder in one ``lm_head``
(``RobertaLMHead``, whose output is the decoder's), ELECTRA's generator head is BERT's under other attribute names.
ELECTRA embeds at ``embedding_size`` and projects to ``hidden_size`` before the first block (``width``; the
embeddings' relation without ``enters``, `projection_relation` tying the projection to the first block's input).
"""

from __future__ import annotations

import dataclasses
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
#: ELECTRA's embeddings: a width of their own (``embedding_size``), projected to ``hidden_size`` before the blocks
Embedded = layout("Embedded", "batch seq embedding_size")
EmbeddedPositionRows = layout("EmbeddedPositionRows", "seq embedding_size")


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


def after_the_padding_row(host: Any, ids: Any, mask: Any) -> Any:
    """RoBERTa's positions (fairseq's ``make_positions``), from the config alone: a real token's row is
    ``pad_token_id`` + its count among its row's real tokens (the first one's ``pad_token_id + 1``), a padding
    token's is ``pad_token_id`` itself."""
    pad = host.text_config.pad_token_id
    real = ids.ne(pad).long()
    return real.cumsum(1) * real + pad


def _types(r: dict) -> Any:
    """The token types the call passed, or zeros (the model's default when none are passed)."""
    types = r["token_type_ids"]
    return torch.zeros_like(r["input_ids"]) if types is None else types


def embeddings_relation(positions: Callable = first_column_positions, rows: str = "p, counted from 0 at the first "
                        "column (padding is on the right)", enters: bool = True, norm: bool = True):
    """The root relation of the summed and normed embeddings; ``positions`` gives each token's table row. With
    ``enters`` the norm's output is what the first block reads (not ELECTRA's: `projection_relation`); without
    ``norm`` the sum itself is (XLM-R XL's: no LayerNorm on the embeddings)."""
    first_block = "layers[0].layer_input == " if enters else ""
    summed_text = "token_embeddings + token_type_embeddings + position_embeddings"
    made = (f"embedding_norm_output == layernorm({summed_text}), layernorm(x) = {_FORM}" if norm else
            f"{summed_text} (no LayerNorm on the embeddings)")
    normed = " embedding_norm_output" if norm else ""

    @relation(f"{first_block}{made}; token_embeddings == embed_tokens.weight[input_ids]; "
              "token_type_embeddings == embed_token_types.weight[token_type_ids] (0 where none are passed); "
              f"position_embeddings == embed_positions.weight[{rows}]",
              proves="token_embeddings token_type_embeddings position_embeddings" + normed,
              reads="input_ids attention_mask token_type_ids token_embeddings token_type_embeddings "
                    "position_embeddings" + normed + (" layers[0].layer_input" if enters else ""))
    def check(host, r):
        ids, mask = r["input_ids"], r["attention_mask"]
        mask = torch.ones_like(ids) if mask is None else mask
        table = host.embed_positions._module.weight
        summed = r["token_embeddings"] + r["token_type_embeddings"] + r["position_embeddings"]  # rows broadcast
        if norm:
            made = [(layer_norm(host.embed_layernorm._module, summed), r["embedding_norm_output"])]
            made += [(r["embedding_norm_output"], r["layers[0].layer_input"])] if enters else []
        else:
            made = [(summed, r["layers[0].layer_input"])]
        return [*made, (host.embed_tokens._module.weight[ids], r["token_embeddings"]),
                (host.embed_token_types._module.weight[_types(r)], r["token_type_embeddings"]),
                (table[positions(host, ids, mask)], r["position_embeddings"].expand(ids.shape[0], -1, -1))]

    return check


@relation("embed_positions is called with pad_token_id + the count of real tokens up to and including each real "
          "token (the first real token's row pad_token_id + 1), and with pad_token_id at every padding token, whose "
          "row is the table's padding_idx: RoBERTa's positions start past the padding row",
          proves="", reads="input_ids embed_positions.input")
def positions_past_the_padding_row(host, r):
    pad = host.text_config.pad_token_id
    return [(after_the_padding_row(host, r["input_ids"], None), r["embed_positions.input"]),
            (torch.tensor(float(pad)), torch.tensor(float(host.embed_positions._module.padding_idx)))]


@relation("layers[0].layer_input == embedding_projection_output == embeddings_project(embedding_norm_output) == "
          "embedding_norm_output @ embeddings_project.weightᵀ + embeddings_project.bias: the embeddings, "
          "embedding_size wide, projected to hidden_size before the first block",
          proves="embedding_projection_output",
          reads="embedding_norm_output embedding_projection_output layers[0].layer_input")
def projection_relation(host, r):
    project = host.embeddings_project._module
    projected = r["embedding_norm_output"] @ project.weight.T + project.bias
    return [(projected, r["embedding_projection_output"]), (r["embedding_projection_output"],
                                                            r["layers[0].layer_input"])]


def _bert_parts(module: Any) -> tuple:
    return module.dense, module.transform_act_fn, module.LayerNorm


def _bert_decoder(host: Any) -> Any:
    return host.lm_head._module


@dataclasses.dataclass(frozen=True)
class MlmHead:
    """Where an encoder's MLM head keeps its transform and its tied decoder.

    ``owner``: the standard path of the module holding the transform's dense, activation and LayerNorm, which
    ``parts(module)`` gives in that order; ``transform``: the standard path whose output is
    ``head_transform_output`` (``shown`` its native name); ``decoder(host)``: the tied decoder; ``act``: the
    activation's name in the relation's text."""

    owner: str = "head_transform"
    parts: Callable = _bert_parts
    transform: str = "head_transform"
    shown: str | None = None
    decoder: Callable = _bert_decoder
    act: str = "act"


#: BERT's: ``cls.predictions.transform`` (dense, transform_act_fn, LayerNorm) mounted as head_transform
BERT_HEAD = MlmHead()


def _transform_relation(head: MlmHead, source: str = "layers[-1].layer_output"):
    @relation(f"head_transform_output == layernorm({head.act}({head.owner}.dense({source}))), "
              f"layernorm(x) = {_FORM}: the MLM head's transform", proves="head_transform_output",
              reads=f"{source} head_transform_output")
    def check(host, r):
        dense, act, norm = head.parts(getattr(host, head.owner)._module)
        return [(layer_norm(norm, act(dense(r[source]))), r["head_transform_output"])]

    return check


def tied_decoder_relation(head: MlmHead):
    @relation("lm_head_output == head_transform_output @ embed_tokens.weightᵀ + lm_head.bias: the decoder tied to the "
              "word embeddings, with a bias of its own", proves="lm_head_output",
              reads="head_transform_output lm_head_output")
    def check(host, r):
        decoder, table = head.decoder(host), host.embed_tokens._module.weight
        tied = torch.tensor(float(decoder.weight.data_ptr() == table.data_ptr()))
        return [(decoder(r["head_transform_output"]), r["lm_head_output"]), (torch.tensor(1.0), tied)]

    return check


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


@relation("token_type_ids == 0 at every token: type_vocab_size is 1, so the table's one row is every token's "
          "(RoBERTa's tokenizer passes no token types; the model embeds its zeros)",
          proves="token_type_ids", reads="token_type_ids input_ids")
def _one_token_type(host, r):
    return [(torch.zeros_like(r["input_ids"]), r["token_type_ids"]),
            (torch.tensor(1.0), torch.tensor(float(host.text_config.type_vocab_size)))]


def encoder_root_relations(positions_relation=None, head: MlmHead = BERT_HEAD, extra: tuple = (),
                           one_type: bool = False, final_norm: bool = False) -> tuple:
    """The decoder's root relations that hold on an encoder (the stack, the logits, the lens, the ids), with the
    embeddings' (``positions_relation``, then ``extra``: RoBERTa's positions, ELECTRA's projection), the head's,
    the token types' (``one_type``: RoBERTa's one row) and the right padding's in place of the rest. A pre-norm
    stack's ``final_norm`` is the decoder's, and the head's transform reads its output."""
    keep = ("layers[i].layer_output ==", "logits == lm_head_output", "unembed(", "input_ids ==",
            *(("final_norm_output ==",) if final_norm else ()))
    shared = tuple(r for r in ROOT_RELATIONS if r.text.startswith(keep))
    source = "final_norm_output" if final_norm else "layers[-1].layer_output"
    return (positions_relation or embeddings_relation(), *extra, _transform_relation(head, source),
            tied_decoder_relation(head), *shared, _one_token_type if one_type else _token_types, _right_padding)


def encoder_root_values(head: MlmHead = BERT_HEAD, per_row_positions: bool = False, width=Residual,
                        one_type: bool = False, final_norm: bool = False, embedding_norm: bool = True) -> list[Value]:
    """The encoder root's values. ``per_row_positions``: the model numbers each row's positions (RoBERTa), so its
    position embeddings are per token, not one row per position shared by the batch; ``one_type``: the tokenizer
    passes no token types (RoBERTa's), so ``token_type_ids`` are read where the model embeds them; ``width``: the
    layout of the
    embeddings and the head's transform (ELECTRA's ``Embedded``, ``embedding_size`` wide), whose projection to the
    stream is then a value of its own (``embedding_projection_output``); ``final_norm``: a pre-norm stack's norm past
    the last block, at ``norm``; without ``embedding_norm`` the summed embeddings enter the first block unnormed."""
    own_width = width is not Residual
    if per_row_positions:
        positions = Value("position_embeddings", width, "The learned position embedding's output, one row per "
                          "token: the model numbers each row's real tokens itself, from pad_token_id + 1",
                          child("embed_positions"))
    else:
        positions = Value("position_embeddings", EmbeddedPositionRows if own_width else PositionRows, "The learned "
                          "position embedding's output: one row per position, added to every row of the batch (the "
                          "model numbers the positions itself)", child("embed_positions"), view=SHARED_ROWS)
    projected = [Value("embedding_projection_output", Residual, "embeddings_project's output: the normed embeddings "
                       "projected from embedding_size to hidden_size, what enters the first block",
                       child("embeddings_project"))] if own_width else []
    return [
        Value("logits", Logits, "The logits the model returns: the MLM head's scores at every position",
              own("output", attr="logits")),
        Value("token_embeddings", width, "The word embedding's output, before the sum", child("embed_tokens")),
        Value("token_type_embeddings", width, "The token type embedding's output (segment A 0, B 1)",
              child("embed_token_types")),
        positions,
        Value("embedding_norm_output", width, "The LayerNorm of the three embeddings' sum: what enters the first "
              "block" + (" once projected" if own_width else ""), child("embed_layernorm"),
              conditions=() if embedding_norm else (never("there is no LayerNorm on the embeddings: their sum enters "
                                                          "the first block (layers[0].layer_input)"),)),
        *projected,
        Value("final_norm_output", Residual, "The residual stream after the final norm: the LayerNorm past the "
              "last pre-norm block, what the MLM head reads", child("norm")) if final_norm else
        Value("final_norm_output", Residual, "The residual stream after the final norm", child("embed_layernorm"),
              conditions=(never("an encoder's blocks are post-norm: each ends in its own LayerNorm, and there is no "
                                "final norm (the MLM head's transform has one: head_transform_output)"),)),
        Value("head_transform_output", width, "The MLM head's transform, LayerNorm(act(dense(x))): what the tied "
              "decoder reads", child(head.transform, shown=head.shown)),
        Value("lm_head_output", Logits, "The decoder's scores (tied to the word embeddings, plus its bias)",
              child("lm_head")),
        Value("input_ids", Tokens, "The token ids the model was called with", own("input", element="input_ids"),
              view=READ_ONLY),
        Value("attention_mask", Tokens, "The attention mask the model was called with; zeros are padding, on the "
              "right", own("input", element="attention_mask"), view=READ_ONLY),
        Value("token_type_ids", Tokens, "The token types the model embeds: its zeros (the tokenizer passes none, "
              "and type_vocab_size is 1)", child("embed_token_types", "input"), view=READ_ONLY) if one_type else
        Value("token_type_ids", Tokens, "The token types the model was called with (0 the first text, 1 the pair's "
              "second); None when the call passed none", own("input", element="token_type_ids"), view=READ_ONLY),
        Value("input_size", Scalar, "[batch, seq] of the current call; read-only", own("input", element="input_ids"),
              view=derived("shape", lambda ids: list(ids.shape))),
    ]


ENCODER_ROOT_VALUES = encoder_root_values()


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


def _every_head(model: Any) -> int:
    """Every head has its own key and value: an encoder's config (BertConfig, RobertaConfig, ElectraConfig) has no
    num_key_value_heads."""
    return model.text_config.num_attention_heads


def encoder_root(name: str, family_module: Any, values: list[Value] = ENCODER_ROOT_VALUES,
                 relations: tuple | None = None, final_norm: bool = False) -> type:
    """An encoder's root host class: ``values`` and ``relations`` (BERT's by default), no final norm unless a
    pre-norm stack has one (``final_norm``, mounted as ``norm``)."""
    from ...core.hosts import host
    from ...core.model import StandardModel

    return host(name, StandardModel, values=values, FINAL_NORM=final_norm, family_module=family_module,
                RELATIONS=encoder_root_relations() if relations is None else relations,
                num_kv_heads=property(_every_head, doc=_every_head.__doc__))


def _roberta_parts(module: Any) -> tuple:
    from transformers.activations import gelu  # RobertaLMHead's own

    return module.dense, gelu, module.layer_norm


def _roberta_decoder(host: Any) -> Any:
    return host.lm_head._module.decoder


#: RoBERTa's (and XLM-R's): one ``lm_head`` holding dense, GELU, layer_norm and the decoder; lm_head is all of it
ROBERTA_HEAD = MlmHead(owner="lm_head", parts=_roberta_parts, transform="lm_head.layer_norm",
                       decoder=_roberta_decoder, act="gelu")


def past_the_padding_row_root(head: MlmHead = ROBERTA_HEAD, final_norm: bool = False,
                              embedding_norm: bool = True) -> tuple[list[Value], tuple]:
    """The root values and relations of an encoder numbering its positions past the padding row (RoBERTa's):
    position embeddings per token, their rows proven from the ids and ``pad_token_id``; a pre-norm stack's
    ``final_norm`` and ``embedding_norm`` as `encoder_root_values` takes them."""
    rows = ("pad_token_id + the count of real tokens up to each real token (pad_token_id + 1 the first), "
            "pad_token_id at padding")
    relations = encoder_root_relations(embeddings_relation(after_the_padding_row, rows, norm=embedding_norm), head,
                                       (positions_past_the_padding_row,), one_type=True, final_norm=final_norm)
    return encoder_root_values(head, per_row_positions=True, one_type=True, final_norm=final_norm,
                               embedding_norm=embedding_norm), relations


#: the modules every BERT-style root has: its embeddings, and the stack's first block inside
EMBEDDING_PATHS = ("embed_tokens", "embed_token_types", "embed_positions", "embed_layernorm")
STACK_PATHS = ("layers", "layers.0.self_attn", "layers.0.self_attn.self", "layers.0.self_attn.E_output.dense",
               "layers.0.intermediate", "layers.0.E_output.dense", "layers.0.E_output.LayerNorm")


def roberta_paths(model: Any) -> list[str]:
    """``required_paths`` of a RoBERTa-style encoder (RoBERTa, XLM-R): BERT's stack, the head one ``lm_head``."""
    return [*EMBEDDING_PATHS, "lm_head", "lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", *STACK_PATHS]


#: the right padding's relation and the heads' count, for an encoder whose root is not BERT's (ModernBERT's)
RIGHT_PADDING_RELATION = _right_padding
every_head = _every_head
