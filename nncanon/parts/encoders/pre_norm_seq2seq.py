"""Two pre-norm stacks under one model (T5's tree): RMS norms before each sublayer, a final norm per stack, relative
position biases in the attention, and a tied head that reads the decoder's output rescaled.

    enc_0  = embed_tokens(input_ids)                                      no position embedding: the attention's bias
    enc    = final_layer_norm(encoder.layers[...](enc_0))                 bidirectional blocks
    dec_0  = embed_tokens(decoder_input_ids)
    dec    = final_layer_norm(decoder.layers[...](dec_0, enc))            causal, cross-attending to enc
    logits = lm_head(dec · d_model^-0.5)                                  tied: the rescale (T5's; v1.1 has none)

Every norm is T5's RMS norm: ``x / sqrt(mean(x²) + eps) · weight``, no mean subtracted and no bias (`rms_norm`).
A block is ``layer[0]`` (the self-attention sublayer: its norm, ``SelfAttention`` mounted as ``self_attn``, the add),
on the decoder ``layer[1]`` (the cross-attention sublayer: its norm, ``EncDecAttention`` mounted as ``cross_attn``,
the add), then ``layer[-1]`` (the MLP sublayer: its norm, ``DenseReluDense`` mounted as ``mlp``, the add): each
sublayer adds its output to the stream it normed. The stacks' hosts (``model.encoder``, ``model.decoder``) carry the
ids, ``token_embeddings``, ``final_norm_output``, ``stack_output`` and the relation proving every block's
``attention_position_bias`` (`nncanon.parts.attention.relative_position`). The root's ids, shifted decoder ids and
the encoder's output handed to every cross-attention are `nncanon.parts.encoders.seq2seq`'s.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import Logits, Residual, Tokens
from ...core.locators import FIRST, child, own
from ...core.model import StandardModel
from ...core.relations import first, relation
from ...core.values import Value
from ...core.views import READ_ONLY
from ..attention.relative_position import (
    POSITION_BIAS_RELATIONS,
    BiasedDecoderAttention,
    BiasedEncoderAttention,
    UnscaledCrossAttention,
)
from ..blocks.decoder import BLOCK_RELATIONS, ROOT_RELATIONS
from ..blocks.per_layer_inputs import rms
from .seq2seq import SEQ2SEQ_ROOT_RELATIONS, SEQ2SEQ_ROOT_VALUES
from .stack_lens import DECODER_LENS, ENCODER_LENS

RMS = "rmsnorm(x) = x / sqrt(mean(x²) + eps) · weight (no mean subtracted, no bias)"


def rms_norm(norm: Any, x: Any) -> Any:
    """T5's norm in float64: ``x / sqrt(mean(x²) + eps) · weight``."""
    return rms(norm, x)


# -- the stacks ------------------------------------------------------------------------------------------------


@relation("layers[0].layer_input == token_embeddings == embed_tokens.weight[input_ids] (no position embedding, no "
          "scale)", proves="token_embeddings", reads="input_ids token_embeddings layers[0].layer_input")
def _embedded(host, r):
    return [(host._module.embed_tokens.weight[r["input_ids"]], r["token_embeddings"]),
            (r["token_embeddings"], r["layers[0].layer_input"])]


@relation(f"stack_output == final_norm_output == rmsnorm(layers[-1].layer_output), {RMS}: the stack's final norm",
          proves="final_norm_output stack_output", reads="layers[-1].layer_output final_norm_output stack_output")
def _final(host, r):
    return [(rms_norm(host._module.final_layer_norm, first(r["layers[-1].layer_output"])), r["final_norm_output"]),
            (r["final_norm_output"], r["stack_output"])]


_STACK_RELATIONS = (_embedded, ROOT_RELATIONS[0], _final, *POSITION_BIAS_RELATIONS)
_STACK_VALUES = [
    Value("input_ids", Tokens, "The token ids the stack embeds", own("input", element="input_ids"), view=READ_ONLY),
    Value("token_embeddings", Residual, "The word embedding's output: what enters the stack's first block",
          child("embed_tokens")),
    Value("final_norm_output", Residual, "The stack's final RMS norm of its last block's output",
          child("final_layer_norm")),
    Value("stack_output", Residual, "What the stack returns (last_hidden_state): its final norm's output",
          own("output", attr="last_hidden_state")),
]
PreNormEncoderStack = host("PreNormEncoderStack", values=_STACK_VALUES, HOST="model.encoder", KIND="encoder stack",
                           RELATIONS=_STACK_RELATIONS, **ENCODER_LENS)
PreNormDecoderStack = host("PreNormDecoderStack", values=_STACK_VALUES, HOST="model.decoder", KIND="decoder stack",
                           RELATIONS=_STACK_RELATIONS, **DECODER_LENS)

# -- the blocks ------------------------------------------------------------------------------------------------


def _normed(stream: str, value: str, sublayer: int, reader: str):
    """``value == rmsnorm_{layer[sublayer]}(stream) == what reader is called with`` (the MLP's: ``mlp_input``)."""
    called = "mlp_input" if reader == "mlp" else f"{reader}.input"
    what = "mlp_input == " if reader == "mlp" else ""
    proves = f"{value} mlp_input" if reader == "mlp" else value

    @relation(f"{what}{value} == rmsnorm({stream}) == what {reader} is called with, rmsnorm: layer[{sublayer}]"
              f".layer_norm, {RMS}", proves=proves, reads=f"{stream} {value} {called}")
    def check(host, r):
        norm = host._module.layer[sublayer].layer_norm
        return [(rms_norm(norm, r[stream]), r[value]), (first(r[called]), r[value])]

    return check


@relation("layer_mid + cross_attn.attention_output == cross_attention_mid: the cross-attention's add",
          proves="cross_attention_mid cross_attn.attention_output",
          reads="layer_mid cross_attn.attention_output cross_attention_mid",
          adds=("layer_mid", "cross_attn.attention_output", "cross_attention_mid"))
def _cross_add(host, r):
    return [(r["layer_mid"] + first(r["cross_attn.attention_output"]), r["cross_attention_mid"])]


@relation("cross_attention_mid + mlp.mlp_output == layer_output", proves="layer_output mlp.mlp_output",
          reads="cross_attention_mid mlp.mlp_output layer_output",
          adds=("cross_attention_mid", "mlp.mlp_output", "layer_output"))
def _mlp_after_cross(host, r):
    return [(r["cross_attention_mid"] + r["mlp.mlp_output"], r["layer_output"])]


def _block_values(mlp_sublayer: int) -> list[Value]:
    cross = [
        Value("cross_attention_norm_output", Residual, "The normed stream the cross-attention reads its queries "
              "from: layer[1]'s RMS norm of layer_mid", child("layer.1.layer_norm")),
        # the cross-attention's norm reads the residual its output is added to: an assignment writes into it
        Value("cross_attention_mid", Residual, "The residual stream after the cross-attention's add",
              child("layer.2.layer_norm", "input"), assign_in_place=True),
    ] if mlp_sublayer == 2 else []
    return [
        Value("layer_input", Residual, "The residual stream entering the block", own("input")),
        Value("attention_norm_output", Residual, "The normed stream the self-attention reads: layer[0]'s RMS norm",
              child("layer.0.layer_norm")),
        # the next sublayer's norm reads the residual its output is added to: an assignment writes into it
        Value("layer_mid", Residual, "The residual stream after the self-attention's add",
              child("layer.1.layer_norm", "input"), assign_in_place=True),
        *cross,
        Value("mlp_norm_output", Residual, f"The normed stream entering the MLP: layer[{mlp_sublayer}]'s RMS norm",
              child(f"layer.{mlp_sublayer}.layer_norm")),
        Value("mlp_input", Residual, "What the MLP is called with", child("mlp", "input")),
        Value("layer_output", Residual, "The residual stream leaving the block (its first output)",
              own("output", element=FIRST)),
    ]


_mixer_add, _mlp_add = BLOCK_RELATIONS[:2]
#: ``model.encoder.layers[i]``: RMS norm, self-attention, add; RMS norm, MLP, add
PreNormEncoderBlock = host("PreNormEncoderBlock", values=_block_values(1), HOST="model.encoder.layers[i]",
                           KIND="block", MIXERS=("self_attn",),
                           RELATIONS=(_normed("layer_input", "attention_norm_output", 0, "self_attn"), _mixer_add,
                                      _normed("layer_mid", "mlp_norm_output", 1, "mlp"), _mlp_add))
#: ``model.decoder.layers[i]``: the encoder block's, with the cross-attention sublayer between the two
PreNormDecoderBlock = host("PreNormDecoderBlock", values=_block_values(2), HOST="model.decoder.layers[i]",
                           KIND="block", MIXERS=("self_attn",),
                           RELATIONS=(_normed("layer_input", "attention_norm_output", 0, "self_attn"), _mixer_add,
                                      _normed("layer_mid", "cross_attention_norm_output", 1, "cross_attn"),
                                      _cross_add, _normed("cross_attention_mid", "mlp_norm_output", 2, "mlp"),
                                      _mlp_after_cross))

# -- the root --------------------------------------------------------------------------------------------------


def output_scale(config: Any) -> float:
    """What the decoder's output is multiplied by before the head: d_model^-0.5 where the config says so (T5's
    scale_decoder_outputs: the checkpoint ties its head; T5 v1.1's does not), 1 on a model that never rescales
    (mT5's forward has no such step)."""
    return config.d_model ** -0.5 if getattr(config, "scale_decoder_outputs", False) else 1.0


def _tie(host: Any) -> list:
    """(1, 1) when lm_head.weight is the word embedding of both stacks, one tensor; nothing on an untied head (5.23's
    T5Config and MT5Config tie every head, whatever the checkpoint's config.json says)."""
    module = host._module
    if not module.config.tie_word_embeddings:
        return []
    weight = host.lm_head._module.weight.data_ptr()
    tied = all(stack.embed_tokens.weight.data_ptr() == weight for stack in (module.get_encoder(),
                                                                             module.get_decoder()))
    return [(torch.tensor(1.0), torch.tensor(float(tied)))]


@relation("lm_head_output == lm_head(decoder.stack_output · scale), decoder.stack_output == decoder.final_norm_output "
          "(what the decoder returns), scale == d_model^-0.5 when config.scale_decoder_outputs (T5 whose checkpoint "
          "ties its head), else 1 (mT5's forward never rescales); tied: lm_head.weight is both stacks' "
          "embed_tokens.weight, one tensor: the decoder's final norm, rescaled, into the head", proves="lm_head_output",
          reads="decoder.final_norm_output decoder.stack_output lm_head_output")
def _rescaled_head(host, r):
    scale = output_scale(host._module.config)
    return [(host.lm_head._module(r["decoder.stack_output"] * scale), r["lm_head_output"]),
            (r["decoder.final_norm_output"], r["decoder.stack_output"]), *_tie(host)]


_logits = ROOT_RELATIONS[4]  # logits == lm_head_output (nothing past the head)


@relation("unembed(decoder.layers[-1].layer_output) == logits: the lens (model.unembed) applies the decoder's final "
          "norm, the rescale (d_model^-0.5 where the config says so) and the head", proves="",
          reads="decoder.layers[-1].layer_output logits")
def _lens(host, r):
    return [(host.unembed(first(r["decoder.layers[-1].layer_output"])), r["logits"])]


def before_the_head(model: Any, x: Any) -> Any:
    """The lens's step between the last block and the head: the decoder's final norm, then the rescale."""
    return model.decoder.final_layer_norm(x) * output_scale(model._module.config)


PRE_NORM_ROOT_RELATIONS = (*SEQ2SEQ_ROOT_RELATIONS[:4], _rescaled_head, _logits, _lens)
PRE_NORM_ROOT_VALUES = [
    Value("lm_head_output", Logits, "The head's scores of the decoder's rescaled output", child("lm_head"))
    if value.name == "lm_head_output" else value for value in SEQ2SEQ_ROOT_VALUES]


def shift_when_missing(model: Any, args: tuple, kwargs: dict) -> tuple:
    """A family's ``decoder_inputs``: T5's forward shifts only labels, so a call with no decoder_input_ids (and no
    decoder embeddings) decodes ``input_ids`` shifted one to the right behind decoder_start_token_id, as BART's
    model does itself; the root relation on ``decoder.input_ids`` states it."""
    if any(kwargs.get(name) is not None for name in ("decoder_input_ids", "decoder_inputs_embeds", "labels")):
        return args, kwargs
    ids = kwargs.get("input_ids", args[0] if args and isinstance(args[0], torch.Tensor) else None)
    if ids is None:
        return args, kwargs
    return args, {**kwargs, "decoder_input_ids": model._module._shift_right(ids)}


def pre_norm_rename(mlp: dict[str, str]) -> dict[str, str]:
    """T5's mounts: the stacks' blocks as ``layers``, the attentions and their projections, the MLP (``mlp``: the
    family's projections' names on top)."""
    return {"block": "layers", "layer.0.SelfAttention": "self_attn", "layer.1.EncDecAttention": "cross_attn",
            "layer.1.DenseReluDense": "mlp", "layer.2.DenseReluDense": "mlp", "q": "q_proj", "k": "k_proj",
            "v": "v_proj", "o": "o_proj", **mlp}


def pre_norm_layer_types(model: StandardModel) -> list[str]:
    """The kind of every block, the encoder's then the decoder's (the family's ``STACKS``): T5Config and MT5Config
    have no layer_types."""
    config = model.text_config
    return ["encoder_block"] * config.num_layers + ["decoder_block"] * config.num_decoder_layers


def pre_norm_dim_sizes(model: StandardModel) -> dict[str, int]:
    """The MLP's width: d_ff."""
    return {"intermediate_size": model.text_config.d_ff}


def pre_norm_required_paths(model: StandardModel) -> list[str]:
    return list(PRE_NORM_PATHS)


#: the modules every T5-style model has, each stack's first block inside
PRE_NORM_PATHS = ("encoder", "decoder", "lm_head", "encoder.embed_tokens", "encoder.layers",
                  "encoder.final_layer_norm", "encoder.layers.0.self_attn", "encoder.layers.0.mlp",
                  "decoder.embed_tokens", "decoder.layers", "decoder.final_layer_norm", "decoder.layers.0.self_attn",
                  "decoder.layers.0.cross_attn", "decoder.layers.0.mlp")


def pre_norm_envoys(mlp_class: type, mlp_host: type) -> dict:
    """A T5-style family's ``ENVOYS``: the stacks and their blocks by path, one attention class in three places (the
    stacks' self-attentions and the cross-attention, by path), and the family's MLP class on ``mlp_host``."""
    return {"encoder": PreNormEncoderStack, "decoder": PreNormDecoderStack, "encoder.layers.*": PreNormEncoderBlock,
            "decoder.layers.*": PreNormDecoderBlock, "encoder.layers.*.self_attn": BiasedEncoderAttention,
            "decoder.layers.*.self_attn": BiasedDecoderAttention, "cross_attn": UnscaledCrossAttention,
            mlp_class: mlp_host}


def pre_norm_root(name: str, family_module: Any) -> type:
    """A T5-style root host class: its stacks are hosts of their own, each with its final norm."""
    from .seq2seq import _every_head

    return host(name, StandardModel, values=PRE_NORM_ROOT_VALUES, FINAL_NORM=False, family_module=family_module,
                RELATIONS=PRE_NORM_ROOT_RELATIONS, num_kv_heads=property(_every_head, doc=_every_head.__doc__))
