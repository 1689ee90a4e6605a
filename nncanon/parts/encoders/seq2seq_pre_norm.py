"""The pre-norm encoder-decoder (mBART's, Pegasus's): BART's two stacks (`nncanon.parts.encoders.seq2seq`) with a
LayerNorm before each sublayer and a final LayerNorm (``layer_norm``) closing each stack.

    mid  = x + self_attn(LayerNorm_a(x))                  attention_norm_output, layer_mid
    cmid = mid + cross_attn(LayerNorm_c(mid), enc)        decoder only: cross_attention_input, cross_attention_mid
    out  = m + fc2(act(fc1(LayerNorm_f(m))))              m = mid (encoder) or cmid (decoder); mlp_norm_output
    stack_output = layer_norm(layers[-1].layer_output)    final_norm_output

The stream between blocks is never normed, so the stack's output is its final LayerNorm's, and that (not the last
block's output) is what the cross-attention reads and the head scores. The names are BART's: ``cross_attention_input``
is what the cross-attention reads (here the LayerNorm of ``layer_mid``, not a stream its output is added to).
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import Neurons, Residual
from ...core.locators import child, own
from ...core.relations import first, relation
from ...core.values import Value
from ..blocks.norms import formula, layer_norm
from .seq2seq import _STACK, DecoderStack, EncoderStack, _fc, _positions, lens_relation

_FORM = formula("· weight + bias")


@relation(f"final_norm_output == layernorm(layers[-1].layer_output) == stack_output: the stack's final LayerNorm is "
          f"what it returns, layernorm(x) = {_FORM}", proves="final_norm_output stack_output",
          reads="layers[-1].layer_output final_norm_output stack_output")
def final_norm(host, r):
    normed = layer_norm(host._module.layer_norm, first(r["layers[-1].layer_output"]))
    return [(normed, r["final_norm_output"]), (r["final_norm_output"], r["stack_output"])]


FINAL_NORM = Value("final_norm_output", Residual, "The stack's final LayerNorm (layer_norm) of its last block's output",
                    child("layer_norm"))


def pre_norm_stacks(embedding) -> tuple[type, type]:
    """The encoder and decoder stack hosts of a pre-norm encoder-decoder, ``embedding`` the relation of what enters
    the first block (mBART's LayerNorm of the embeddings' sum; Pegasus's bare sum)."""
    relations = (embedding, _positions, _STACK, final_norm)
    return (host("PreNormEncoderStack", EncoderStack, values=[FINAL_NORM], RELATIONS=relations),
            host("PreNormDecoderStack", DecoderStack, values=[FINAL_NORM], RELATIONS=relations))


#: the root's lens relation: the decoder's output is already its final LayerNorm's
PRE_NORM_LENS = lens_relation("decoder.stack_output is the decoder's final LayerNorm's output")


# -- the blocks ------------------------------------------------------------------------------------------------


def _normed_add(norm: str, before: str, normed: str, reads: str, added: str, after: str):
    """``normed == norm(before) == what the sublayer reads``; ``before + added == after``."""

    @relation(f"{normed} == layernorm({before}) == what {reads} is called with, layernorm(x) = {_FORM}; "
              f"{before} + {added} == {after}: pre-norm, the LayerNorm before the sublayer, the add unnormed",
              proves=f"{normed} {after} {added}", reads=f"{before} {normed} {reads}.input {added} {after}",
              adds=(before, added, after))
    def check(host, r):
        return [(layer_norm(getattr(host._module, norm), r[before]), r[normed]),
                (first(r[f"{reads}.input"]), r[normed]), (r[before] + r[added], r[after])]

    return check


def _block_values(mlp_stream: str) -> list[Value]:
    return [
        Value("layer_input", Residual, "The residual stream entering the block", own("input")),
        Value("attention_norm_output", Residual, "self_attn_layer_norm's output: what the self-attention reads",
              child("self_attn_layer_norm")),
        # the next LayerNorm's input is also the residual the next sublayer's output is added to: an assignment
        # writes into it
        Value("layer_mid", Residual, "The residual stream after the self-attention's add",
              child("encoder_attn_layer_norm" if mlp_stream == "cross_attention_mid" else "final_layer_norm",
                    "input"), assign_in_place=True),
        Value("mlp_norm_output", Residual, "final_layer_norm's output: what the MLP reads", child("final_layer_norm")),
        Value("mlp_input", Residual, "What fc1 is called with", child("fc1", "input")),
        Value("mlp_activation", Neurons, "The activation's output, activation_fn(fc1(mlp_input))",
              child("activation_fn")),
        Value("mlp_neurons", Neurons, "What fc2 receives: the activation itself (no gate)", child("fc2", "input")),
        Value("mlp_output", Residual, "What the MLP adds to the stream: fc2's output", child("fc2")),
        Value("layer_output", Residual, f"The residual stream leaving the block: {mlp_stream} + mlp_output",
              own("output")),
    ]


@relation(f"mlp_input == mlp_norm_output, the MLP's LayerNorm (final_layer_norm), layernorm(x) = {_FORM}",
          proves="mlp_input", reads="mlp_norm_output mlp_input")
def _mlp_reads_the_norm(host, r):
    return [(r["mlp_norm_output"], r["mlp_input"])]


def _mlp_norm(stream: str):
    @relation(f"mlp_norm_output == layernorm({stream}), layernorm(x) = {_FORM}; layer_output == {stream} + "
              "mlp_output: the MLP's add, unnormed", proves="mlp_norm_output layer_output mlp_output",
              reads=f"{stream} mlp_norm_output mlp_output layer_output", adds=(stream, "mlp_output", "layer_output"))
    def check(host, r):
        return [(layer_norm(host._module.final_layer_norm, r[stream]), r["mlp_norm_output"]),
                (r[stream] + r["mlp_output"], r["layer_output"])]

    return check


_SELF = _normed_add("self_attn_layer_norm", "layer_input", "attention_norm_output", "self_attn",
                    "self_attn.attention_output", "layer_mid")

#: ``model.encoder.layers[i]``: LayerNorm -> self-attention -> add; LayerNorm -> fc1 -> act -> fc2 -> add
PreNormEncoderBlock = host("PreNormEncoderBlock", values=_block_values("layer_mid"),
                           HOST="model.encoder.layers[i]", KIND="block", MIXERS=("self_attn",),
                           RELATIONS=(_SELF, _mlp_norm("layer_mid"), _mlp_reads_the_norm, _fc))

_cross_values = [
    Value("cross_attention_input", Residual, "encoder_attn_layer_norm's output: what the cross-attention reads its "
          "queries from", child("encoder_attn_layer_norm")),
    Value("cross_attention_mid", Residual, "The residual stream after the cross-attention's add",
          child("final_layer_norm", "input"), assign_in_place=True),
]
#: ``model.decoder.layers[i]``: the encoder block's two sublayers with a LayerNorm -> cross-attention -> add between
PreNormDecoderBlock = host("PreNormDecoderBlock", values=_block_values("cross_attention_mid")[:3] + _cross_values
                           + _block_values("cross_attention_mid")[3:],
                           HOST="model.decoder.layers[i]", KIND="block", MIXERS=("self_attn",),
                           RELATIONS=(_SELF, _normed_add("encoder_attn_layer_norm", "layer_mid",
                                                         "cross_attention_input", "cross_attn",
                                                         "cross_attn.attention_output", "cross_attention_mid"),
                                      _mlp_norm("cross_attention_mid"), _mlp_reads_the_norm, _fc))
