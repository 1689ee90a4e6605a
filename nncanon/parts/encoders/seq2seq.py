"""Two stacks under one model: an encoder-decoder's root, its stacks and their post-norm blocks (BART's tree).

    enc_0  = LayerNorm_e(embed_tokens(input_ids) + embed_positions.weight[p + 2])        encoder.embedding_norm_output
    enc    = encoder.layers[...](enc_0)                                                   bidirectional blocks
    dec_0  = LayerNorm_d(embed_tokens(decoder_input_ids) + embed_positions.weight[p + 2])
    dec    = decoder.layers[...](dec_0, enc)                                              causal, cross-attending to enc
    logits = lm_head(dec) + final_logits_bias                                             lm_head tied to the embeddings

Each stack is a host of its own (``model.encoder``, ``model.decoder``: `EncoderStack`, `DecoderStack`) with the
values a decoder-only root has for its one stack: the ids it embeds, ``token_embeddings``, ``position_embeddings``,
``embedding_norm_output``, ``final_norm_output`` (BART has none: each block ends in its own LayerNorm) and
``stack_output``, what the stack returns. Its blocks are ``model.encoder.layers[i]`` and
``model.decoder.layers[i]`` with the block vocabulary of the post-norm encoder (`nncanon.parts.encoders.post_norm`):
``layer_input``, ``layer_mid`` (the self-attention's add), ``mlp_norm_output`` ... ``layer_output``. A decoder block
adds its cross-attention between the two: ``cross_attention_input`` (the self-attention add's LayerNorm, what
``cross_attn`` reads and its output is added to), ``cross_attention_mid`` (that add, before its LayerNorm), whose
LayerNorm is ``mlp_norm_output``. The cross-attention itself is `nncanon.parts.attention.cross_attention`'s.

The call: ``model.trace`` takes what the model takes, ``input_ids`` (a prompt, ids or the tokenizer's output) and,
optionally, ``decoder_input_ids``; without them BART's model shifts ``input_ids`` one to the right behind
``decoder_start_token_id`` (``shift_tokens_right``), which the root relation on ``decoder.input_ids`` states.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import Logits, Neurons, Residual, Scalar, Tokens
from ...core.locators import child, own
from ...core.model import StandardModel
from ...core.relations import first, relation
from ...core.values import Value, never
from ...core.views import READ_ONLY, derived
from ..blocks.decoder import ROOT_RELATIONS
from ..blocks.norms import formula, layer_norm
from ..blocks.positions import sinusoid_halves
from .embeddings import SHARED_ROWS, PositionRows, _right_padding
from .post_norm import STREAM_RELATIONS
from .stack_lens import DECODER_LENS, ENCODER_LENS

_FORM = formula("· weight + bias")
_NO_FINAL_NORM = never("the stack's blocks are post-norm: each ends in its own LayerNorm, and there is no final norm")

# -- the stacks ------------------------------------------------------------------------------------------------


def _scaled_rows(host: Any, ids: Any, scaled: bool) -> Any:
    """The word embedding's rows of ``ids``: times sqrt(hidden_size) under ``scale_embedding`` when ``scaled`` (the
    config's switch, stated), else times the module's own embed_scale (BART's 1)."""
    module = host._module
    if scaled:
        config = module.config  # the stack's own: each stack is a PreTrainedModel
        return module.embed_tokens.weight[ids] * (math.sqrt(config.d_model) if config.scale_embedding else 1.0)
    return module.embed_tokens.weight[ids] * getattr(module.embed_tokens, "embed_scale", 1.0)


_SCALED = "sqrt(hidden_size) (· 1 when scale_embedding is off)"


def _embedding_relation(offset: int, scaled: bool = False):
    @relation(f"layers[0].layer_input == embedding_norm_output == layernorm(token_embeddings + position_embeddings), "
              f"layernorm(x) = {_FORM}; token_embeddings == embed_tokens.weight[input_ids] · "
              f"{_SCALED if scaled else 'embed_scale'}; "
              f"position_embeddings == embed_positions.weight[p + {offset}], p counted from 0 at the first column "
              "(the table starts 2 rows in)",
              proves="token_embeddings position_embeddings embedding_norm_output",
              reads="input_ids token_embeddings position_embeddings embedding_norm_output layers[0].layer_input")
    def check(host, r):
        ids, module = r["input_ids"], host._module
        positions = r["position_embeddings"].expand(ids.shape[0], -1, -1)
        table = module.embed_positions.weight
        rows = torch.arange(ids.shape[1])[None].expand(ids.shape[0], -1) + offset
        summed = r["token_embeddings"] + positions
        return [(layer_norm(module.layernorm_embedding, summed), r["embedding_norm_output"]),
                (r["embedding_norm_output"], r["layers[0].layer_input"]),
                (_scaled_rows(host, ids, scaled), r["token_embeddings"]), (table[rows], positions)]

    return check


@relation("position_embeddings == embed_positions.weight[arange(input_ids.shape[1]) + 2]: the rows follow from the "
          "ids' length alone", proves="position_embeddings", reads="input_ids position_embeddings")
def _positions(host, r):
    ids = r["input_ids"]
    rows = torch.arange(ids.shape[1])[None].expand(ids.shape[0], -1) + 2
    return [(host._module.embed_positions.weight[rows], r["position_embeddings"].expand(ids.shape[0], -1, -1))]


@relation("stack_output == layers[-1].layer_output (no final norm): what the stack returns",
          proves="stack_output", reads="layers[-1].layer_output stack_output")
def _stack_output(host, r):
    return [(first(r["layers[-1].layer_output"]), r["stack_output"])]


_STACK = ROOT_RELATIONS[0]  # layers[i].layer_output == layers[i+1].layer_input, on the stack's own blocks


def _stack_values(positions: Value) -> list[Value]:
    return [
        Value("input_ids", Tokens, "The token ids the stack embeds", own("input", element="input_ids"),
              view=READ_ONLY),
        Value("token_embeddings", Residual, "The word embedding's output (times embed_scale), before the sum",
              child("embed_tokens")),
        positions,
        Value("embedding_norm_output", Residual, "The LayerNorm of the embeddings' sum: what enters the stack's first "
              "block", child("embed_layernorm")),
        Value("final_norm_output", Residual, "The stream after the stack's final norm", child("embed_layernorm"),
              conditions=(_NO_FINAL_NORM,)),
        Value("stack_output", Residual, "What the stack returns (last_hidden_state): its last block's output",
              own("output", attr="last_hidden_state")),
    ]


_STACK_RELATIONS = (_embedding_relation(2), _positions, _STACK, _stack_output)

#: ``model.encoder``: its positions one row per token of every row (BART's encoder expands them over the batch)
EncoderStack = host("EncoderStack", values=_stack_values(
    Value("position_embeddings", Residual, "The learned position embedding's output, row p + 2 at position p, for "
          "every row of the batch", child("embed_positions"))),
    HOST="model.encoder", KIND="encoder stack", RELATIONS=_STACK_RELATIONS, **ENCODER_LENS)
#: ``model.decoder``: its positions one row per position, shared by the batch
DecoderStack = host("DecoderStack", values=_stack_values(
    Value("position_embeddings", PositionRows, "The learned position embedding's output: row p + 2 at position p, one "
          "row per position added to every row of the batch", child("embed_positions"), view=SHARED_ROWS)),
    HOST="model.decoder", KIND="decoder stack", RELATIONS=_STACK_RELATIONS, **DECODER_LENS)


@relation("layers[0].layer_input == token_embeddings · sqrt(hidden_size) (· 1 when scale_embedding is off) + "
          "position_embeddings (no LayerNorm on the embeddings); token_embeddings == embed_tokens.weight[input_ids]",
          proves="token_embeddings", reads="input_ids token_embeddings position_embeddings layers[0].layer_input")
def _scaled_sum(host, r):
    ids, module = r["input_ids"], host._module
    config = module.config  # the stack's own: each stack is a PreTrainedModel
    scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
    return [(r["token_embeddings"] * scale + r["position_embeddings"], first(r["layers[0].layer_input"])),
            (module.embed_tokens.weight[ids], r["token_embeddings"])]


@relation("position_embeddings == embed_positions.weight[arange(input_ids.shape[1])] == sinusoid(p) (sin(p · "
          "10000^(−2i/d)) on the first half of the features, cos on the rest: a fixed table): the rows follow from "
          "the ids' length alone", proves="position_embeddings", reads="input_ids position_embeddings")
def _sinusoid_positions(host, r):
    rows = torch.arange(r["input_ids"].shape[1])
    table = sinusoid_halves(rows, host._module.config.d_model)
    return [(table, r["position_embeddings"]), (host._module.embed_positions.weight[rows], r["position_embeddings"])]


_SINUSOID_VALUES = [
    Value("token_embeddings", Residual, "The word embedding's output, before the stack scales it by embed_scale",
          child("embed_tokens")),
    # the module itself returns [seq, hidden_size] (it numbers the positions from the ids' shape alone)
    Value("position_embeddings", PositionRows, "The fixed sinusoid table's rows (embed_positions): row p at position "
          "p, one row per position added to every row of the batch", child("embed_positions")),
    Value("embedding_norm_output", Residual, "The LayerNorm of the embeddings' sum", child("embed_tokens"),
          conditions=(never("the stack has no LayerNorm on its embeddings: its first block reads their scaled sum"),)),
]


def sinusoid_stacks(name: str, tail: tuple, values: tuple = ()) -> tuple[type, type]:
    """The encoder and decoder stacks of Marian's and Pegasus's layout: sinusoidal positions, the word embedding scaled
    by the stack, no LayerNorm on the sum; ``tail`` the relations of what the stack returns, ``values`` its own."""
    relations = (_scaled_sum, _sinusoid_positions, _STACK, *tail)
    return (host(f"{name}EncoderStack", EncoderStack, values=[*_SINUSOID_VALUES, *values], RELATIONS=relations),
            host(f"{name}DecoderStack", DecoderStack, values=[*_SINUSOID_VALUES, *values], RELATIONS=relations))


# -- the blocks ------------------------------------------------------------------------------------------------


def _post_norms(before: str, norm: str):
    @relation(f"mlp_input == mlp_norm_output == {norm}({before}); layer_output == final_layer_norm(mlp_input + "
              f"mlp_output): post-norm, each LayerNorm after its add, layernorm(x) = {_FORM}",
              proves="mlp_norm_output mlp_input layer_output mlp_output",
              reads=f"{before} mlp_norm_output mlp_input mlp_output layer_output",
              adds=("mlp_input", "mlp_output", "layer_output"))
    def check(host, r):
        module = host._module
        return [(layer_norm(getattr(module, norm), r[before]), r["mlp_norm_output"]),
                (r["mlp_norm_output"], r["mlp_input"]),
                (layer_norm(module.final_layer_norm, r["mlp_input"] + r["mlp_output"]), r["layer_output"])]

    return check


@relation("mlp_activation == activation_fn(fc1(mlp_input)); mlp_neurons == mlp_activation (no gate); "
          "mlp_output == fc2(mlp_neurons)", proves="mlp_activation mlp_neurons",
          reads="mlp_input mlp_activation mlp_neurons mlp_output")
def _fc(host, r):
    module = host._module
    return [(module.activation_fn(module.fc1(r["mlp_input"])), r["mlp_activation"]),
            (r["mlp_activation"], r["mlp_neurons"]), (module.fc2(r["mlp_neurons"]), r["mlp_output"])]


@relation(f"cross_attention_input == layernorm(layer_mid) == what cross_attn is called with, layernorm(x) = {_FORM}; "
          "cross_attention_input + cross_attn.attention_output == cross_attention_mid: the cross-attention's add, "
          "before its LayerNorm", proves="cross_attention_input cross_attention_mid cross_attn.attention_output",
          reads="layer_mid cross_attention_input cross_attn.input cross_attn.attention_output cross_attention_mid",
          adds=("cross_attention_input", "cross_attn.attention_output", "cross_attention_mid"))
def _cross_add(host, r):
    module = host._module
    return [(layer_norm(module.self_attn_layer_norm, r["layer_mid"]), r["cross_attention_input"]),
            (r["cross_attention_input"], first(r["cross_attn.input"])),
            (r["cross_attention_input"] + r["cross_attn.attention_output"], r["cross_attention_mid"])]


def _block_values(mlp_norm: str) -> list[Value]:
    return [
        Value("layer_input", Residual, "The residual stream entering the block (a LayerNorm's output)", own("input")),
        Value("attention_norm_output", Residual, "The normed stream entering the attention",
              child("self_attn", "input"), conditions=(never("the block is post-norm: the attention reads "
                                                             "layer_input itself, and the LayerNorm comes after the "
                                                             "add"),)),
        Value("layer_mid", Residual, "The residual stream after the self-attention's add, before its LayerNorm",
              child("self_attn_layer_norm", "input")),
        Value("mlp_norm_output", Residual, f"{mlp_norm}'s output: the stream the MLP reads and its output is added "
              "to", child(mlp_norm)),
        # fc1's input is also the residual fc2's output is added to: an assignment writes into it
        Value("mlp_input", Residual, "What fc1 is called with, and the residual the MLP's output is added to",
              child("fc1", "input"), assign_in_place=True),
        Value("mlp_activation", Neurons, "The activation's output, activation_fn(fc1(mlp_input))",
              child("activation_fn")),
        Value("mlp_neurons", Neurons, "What fc2 receives: the activation itself (no gate)", child("fc2", "input")),
        Value("mlp_output", Residual, "What the MLP adds to the stream before the block's last LayerNorm: fc2's output",
              child("fc2")),
        Value("layer_output", Residual, "The residual stream leaving the block: final_layer_norm of mlp_input + "
              "mlp_output", own("output")),
    ]


#: ``model.encoder.layers[i]``: self-attention, add and LayerNorm; fc1 -> act -> fc2, add and LayerNorm
EncoderBlock = host("EncoderBlock", values=_block_values("self_attn_layer_norm"),
                    HOST="model.encoder.layers[i]", KIND="block", MIXERS=("self_attn",),
                    RELATIONS=(*STREAM_RELATIONS, _post_norms("layer_mid", "self_attn_layer_norm"), _fc))

_cross_values = [
    Value("cross_attention_input", Residual, "The self-attention add's LayerNorm: what the cross-attention reads and "
          "its output is added to", child("self_attn_layer_norm")),
    Value("cross_attention_mid", Residual, "The residual stream after the cross-attention's add, before its LayerNorm",
          child("encoder_attn_layer_norm", "input")),
]
#: ``model.decoder.layers[i]``: causal self-attention, add and LayerNorm; cross-attention to the encoder's output, add
#: and LayerNorm; fc1 -> act -> fc2, add and LayerNorm
DecoderBlock = host("DecoderBlock", values=_block_values("encoder_attn_layer_norm")[:3] + _cross_values
                    + _block_values("encoder_attn_layer_norm")[3:],
                    HOST="model.decoder.layers[i]", KIND="block", MIXERS=("self_attn",),
                    RELATIONS=(*STREAM_RELATIONS, _cross_add, _post_norms("cross_attention_mid",
                                                                          "encoder_attn_layer_norm"), _fc))

# -- the root --------------------------------------------------------------------------------------------------


@relation("lm_head_output == decoder.stack_output @ embed_tokens.weightᵀ: the head tied to the word embeddings of "
          "both stacks, no bias", proves="lm_head_output", reads="decoder.stack_output lm_head_output")
def _tied_head(host, r):
    head = host.lm_head._module
    model = host._module.get_encoder()
    tied = float(head.weight.data_ptr() == model.embed_tokens.weight.data_ptr()
                 == host._module.get_decoder().embed_tokens.weight.data_ptr())
    return [(r["decoder.stack_output"] @ head.weight.T, r["lm_head_output"]), (torch.tensor(1.0), torch.tensor(tied))]


@relation("logits == lm_head_output + final_logits_bias (a buffer, one bias per token of the vocabulary)",
          proves="logits", reads="lm_head_output logits")
def _logits_bias(host, r):
    return [(r["lm_head_output"] + host._module.final_logits_bias, r["logits"])]


@relation("input_ids == encoder.input_ids; input_size == input_ids.shape", proves="input_ids input_size encoder.input_ids",
          reads="input_ids encoder.input_ids input_size")
def _ids(host, r):
    ids = r["input_ids"]
    return [(r["encoder.input_ids"], ids), (torch.tensor(list(ids.shape)), torch.tensor(r["input_size"]))]


@relation("decoder.input_ids == input_ids shifted one to the right behind decoder_start_token_id (pad_token_id in "
          "place of -100): what the decoder embeds when the call passes no decoder_input_ids",
          proves="decoder.input_ids", reads="input_ids decoder.input_ids")
def _shifted(host, r):
    config, ids = host.text_config, r["input_ids"]
    shifted = torch.full_like(ids, config.decoder_start_token_id)
    shifted[:, 1:] = ids[:, :-1]
    shifted = shifted.masked_fill(shifted == -100, config.pad_token_id)
    return [(shifted, r["decoder.input_ids"])]


@relation("decoder.layers[i].cross_attn.encoder_states == encoder.stack_output: every decoder block's "
          "cross-attention reads the encoder's final output", proves="encoder.stack_output",
          reads="encoder.stack_output decoder.layers[*].cross_attn.encoder_states")
def _encoder_to_decoder(host, r):
    return [(r["encoder.stack_output"], states) for states in r["decoder.layers[*].cross_attn.encoder_states"]]


def _shift_when_absent(module: Any, args: tuple, kwargs: dict) -> tuple:
    ids = kwargs.get("input_ids", args[0] if args else None)
    if ids is None or kwargs.get("decoder_input_ids") is not None or kwargs.get("decoder_inputs_embeds") is not None \
            or kwargs.get("labels") is not None:
        return args, kwargs
    config = module.config
    shifted = torch.full_like(ids, config.decoder_start_token_id)
    shifted[:, 1:] = ids[:, :-1]
    return args, {**kwargs, "decoder_input_ids": shifted.masked_fill(shifted == -100, config.pad_token_id)}


def shift_input_ids(model: StandardModel) -> None:
    """A family's ``prepare`` whose model (Pegasus's, Marian's) raises when called without decoder_input_ids: a hook
    before its forward passes BART's shift of input_ids (behind decoder_start_token_id), so a trace takes what BART's
    takes; decoder_input_ids passed are left as they are."""
    model._module.register_forward_pre_hook(_shift_when_absent, with_kwargs=True)


def add_final_logits_bias(model: Any, logits: Any) -> Any:
    """The lens's step past the head (a family's ``past_the_head``): the model adds final_logits_bias to lm_head's
    logits."""
    return logits + model._module.final_logits_bias


past_the_head = add_final_logits_bias  # a family's: the lens adds final_logits_bias, as the model does


def lens_relation(why: str):
    """The lens's root relation; ``why`` says why decoder.stack_output needs no norm before the head."""

    @relation("unembed(decoder.stack_output) == logits: the lens (model.unembed) applies the tied head and "
              f"final_logits_bias ({why})", proves="", reads="decoder.stack_output logits")
    def check(host, r):
        return [(host.unembed(r["decoder.stack_output"]), r["logits"])]

    return check


_lens = lens_relation("no final norm: the decoder's blocks are post-norm")


SEQ2SEQ_ROOT_RELATIONS = (_ids, _right_padding, _shifted, _encoder_to_decoder, _tied_head, _logits_bias, _lens)

SEQ2SEQ_ROOT_VALUES = [
    Value("logits", Logits, "The logits the model returns: the decoder's scores at every target position",
          own("output", attr="logits")),
    Value("lm_head_output", Logits, "The tied head's scores, before final_logits_bias is added", child("lm_head")),
    Value("input_ids", Tokens, "The token ids the model was called with (the encoder's)",
          own("input", element="input_ids"), view=READ_ONLY),
    Value("attention_mask", Tokens, "The attention mask the model was called with; zeros are the source's padding, "
          "on the right", own("input", element="attention_mask"), view=READ_ONLY),
    Value("input_size", Scalar, "[batch, seq] of the current call; read-only", own("input", element="input_ids"),
          view=derived("shape", lambda ids: list(ids.shape))),
]


def _every_head(model: Any) -> int:
    """Every head has its own key and value (BartConfig has no num_key_value_heads)."""
    return model.text_config.num_attention_heads


def seq2seq_root(name: str, family_module: Any, values: list[Value] = SEQ2SEQ_ROOT_VALUES,
                 relations: tuple = SEQ2SEQ_ROOT_RELATIONS) -> type:
    """An encoder-decoder's root host class: its stacks are hosts of their own, and the root has no final norm."""
    return host(name, StandardModel, values=values, FINAL_NORM=False, family_module=family_module,
                RELATIONS=relations, num_kv_heads=property(_every_head, doc=_every_head.__doc__))


def seq2seq_rename() -> dict[str, str]:
    """BART's mounts: the two stacks at the root, the cross-attention and the embeddings' norm by standard names."""
    return {"model.encoder": "encoder", "model.decoder": "decoder", "layernorm_embedding": "embed_layernorm",
            "encoder_attn": "cross_attn", "out_proj": "o_proj"}


#: how every BART-style family lists its blocks: the encoder's stack, then the decoder's
STACKS = ("encoder", "decoder")


def seq2seq_layer_types(model: StandardModel) -> list[str]:
    """The kind of every block, the encoder's then the decoder's (``STACKS``): a BART-style config has no
    layer_types."""
    config = model.text_config
    return ["encoder_block"] * config.encoder_layers + ["decoder_block"] * config.decoder_layers


def seq2seq_dim_sizes(model: StandardModel) -> dict[str, int]:
    """The MLP's width: the encoder's (the tiny recipes and the published checkpoints give both stacks one)."""
    return {"intermediate_size": model.text_config.encoder_ffn_dim}


#: what a BART-style family module assigns alike (each re-exports them: ``from ... import layer_types as layer_types``)
layer_types = seq2seq_layer_types
dim_sizes = seq2seq_dim_sizes


#: the modules every BART-style model has, each stack's first block inside
SEQ2SEQ_PATHS = ("encoder", "decoder", "lm_head", "encoder.embed_tokens", "encoder.embed_positions",
                 "encoder.embed_layernorm", "encoder.layers", "encoder.layers.0.self_attn", "encoder.layers.0.fc1",
                 "decoder.embed_tokens", "decoder.embed_positions", "decoder.embed_layernorm", "decoder.layers",
                 "decoder.layers.0.self_attn", "decoder.layers.0.cross_attn", "decoder.layers.0.fc1")


def required_paths_of(*extra: str, embedding_norm: bool = True):
    """A family's ``required_paths``: BART's modules (less the embeddings' LayerNorm where the stacks have none, as
    Marian's and Pegasus's) and ``extra`` (a pre-norm stack's final ``layer_norm``)."""
    paths = [path for path in SEQ2SEQ_PATHS if embedding_norm or not path.endswith("embed_layernorm")] + list(extra)

    def required_paths(model: StandardModel) -> list[str]:
        return list(paths)

    return required_paths
