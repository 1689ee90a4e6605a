"""A speech encoder-decoder (Whisper's tree): a convolutional front-end over log-mel features, fixed sinusoidal
source positions, pre-norm blocks with a final LayerNorm per stack, and a decoder with learned positions and a head
tied to its word embeddings.

    x      = gelu(conv2(gelu(conv1(input_features))))ᵀ + sinusoids[0 .. source)     encoder.layers[0].layer_input
    enc    = norm_e(encoder.layers[...](x))                                            encoder.stack_output
    dec_0  = embed_tokens(decoder_input_ids) + embed_positions.weight[p]
    logits = lm_head(norm_d(decoder.layers[...](dec_0, enc)))                          lm_head tied to embed_tokens

``input_features`` is ``[batch, num_mel_bins, frames]``; ``conv1`` (kernel 3, padding 1) keeps the frames and
``conv2`` (stride 2) halves them into the encoder's source positions, which must be exactly
``max_source_positions`` (the encoder adds every row of its fixed position table). The front-end's values live on
the encoder stack (``model.encoder``): ``input_features``, ``conv1_output``, ``conv2_input`` (the GELU of conv1's
output), ``conv2_output``, ``position_embeddings`` (the table's rows, one per source position, shared by the batch),
``final_norm_output`` and ``stack_output``. A block is pre-norm (``self_attn_layer_norm`` mounted as
``input_layernorm``, ``final_layer_norm`` as ``post_attention_layernorm``, fc1 -> GELU -> fc2 the block's own
children); a decoder block adds its cross-attention between the two halves: ``cross_attention_input`` (the
cross-attention norm of ``layer_mid``, what ``cross_attn`` reads) and ``cross_attention_mid`` (its add).

The source is never padded (Whisper's feature extractor pads every clip to the same frames and the model takes no
mask over them): the attentions' relations read an all-ones source mask in place of ``model.attention_mask``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import Logits, Neurons, Residual, Tokens, layout
from ...core.locators import FIRST, child, own
from ...core.model import StandardModel
from ...core.relations import Relation, first, relation
from ...core.values import Value
from ...core.views import READ_ONLY
from ...research.weights import Layout
from ..attention.cross_attention import (
    CROSS_RELATIONS,
    DECODER_SELF_RELATIONS,
    ENCODER_SELF_RELATIONS,
    CrossAttention,
    DecoderSelfAttention,
)
from ..attention.softmax import Attention
from ..blocks.decoder import BLOCK_RELATIONS, ROOT_RELATIONS, Block
from ..encoders.bidirectional import padding_mask
from .embeddings import PositionRows
from .seq2seq import SEQ2SEQ_ROOT_RELATIONS, SEQ2SEQ_ROOT_VALUES
from .stack_lens import DECODER_LENS, ENCODER_LENS

#: the log-mel spectrogram the encoder reads
Features = layout("Features", "batch num_mel_bins frames")
#: a convolution's output, channels first: over the frames (conv1) or the source positions (conv2)
FrameChannels = layout("FrameChannels", "batch hidden_size frames")
SourceChannels = layout("SourceChannels", "batch hidden_size seq")


def _in_heads(module: Any, y: Any) -> Any:
    return y.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)


def sinusoids(length: int, channels: int, max_timescale: float = 10000.0) -> torch.Tensor:
    """Whisper's fixed table: sin then cos of p · 10000^(-i / (channels/2 - 1)), one row per position."""
    increment = math.log(max_timescale) / (channels // 2 - 1)
    inverse = torch.exp(-increment * torch.arange(channels // 2))
    scaled = torch.arange(length).view(-1, 1) * inverse.view(1, -1)
    return torch.cat([scaled.sin(), scaled.cos()], dim=1)


# -- the encoder stack: the front-end and the fixed positions ---------------------------------------------------


@relation("conv1_output == conv1(input_features); conv2_input == gelu(conv1_output); conv2_output == "
          "conv2(conv2_input) (stride 2: half the frames)", proves="conv1_output conv2_input conv2_output",
          reads="input_features conv1_output conv2_input conv2_output")
def _front_end(host, r):
    module = host._module
    return [(module.conv1(r["input_features"]), r["conv1_output"]),
            (torch.nn.functional.gelu(r["conv1_output"]), r["conv2_input"]),
            (module.conv2(r["conv2_input"]), r["conv2_output"])]


@relation("layers[0].layer_input == gelu(conv2_output)ᵀ + position_embeddings: every source position adds its row of "
          "the table", proves="position_embeddings", reads="conv2_output position_embeddings layers[0].layer_input",
          adds=("conv2_output", "position_embeddings", "layers[0].layer_input"))
def _source_embedding(host, r):
    frames = torch.nn.functional.gelu(r["conv2_output"]).transpose(1, 2)
    return [(frames + r["position_embeddings"], r["layers[0].layer_input"])]


@relation("position_embeddings == sinusoids(conv2_output.shape[2], hidden_size): one row per source position conv2 "
          "makes (the table has exactly max_source_positions), sin then cos of p · 10000^(-i / (hidden_size/2 - 1)), "
          "fixed (not trained)", proves="position_embeddings", reads="conv2_output position_embeddings")
def _sinusoidal(host, r):
    rows, source = r["position_embeddings"], r["conv2_output"].shape[2]
    return [(sinusoids(source, rows.shape[1]).to(rows.dtype), rows)]


@relation("final_norm_output == norm(layers[-1].layer_output) == stack_output: the stack's final LayerNorm",
          proves="final_norm_output stack_output", reads="layers[-1].layer_output final_norm_output stack_output")
def _final_norm(host, r):
    return [(host._module.layer_norm(first(r["layers[-1].layer_output"])), r["final_norm_output"]),
            (r["final_norm_output"], r["stack_output"])]


_STACK = ROOT_RELATIONS[0]  # layers[i].layer_output == layers[i+1].layer_input, on the stack's own blocks


def _ends() -> list[Value]:
    return [Value("final_norm_output", Residual, "The stream after the stack's final LayerNorm", child("norm")),
            Value("stack_output", Residual, "What the stack returns (last_hidden_state): its final norm's output",
                  own("output", attr="last_hidden_state"))]


#: ``model.encoder``: the front-end over the log-mel features, the fixed positions, the blocks and the final norm
SpeechEncoderStack = host("SpeechEncoderStack", values=[
    Value("input_features", Features, "The log-mel features the encoder reads [batch, num_mel_bins, frames]",
          own("input", element=FIRST), view=READ_ONLY),
    Value("conv1_output", FrameChannels, "conv1's output (before its GELU), channels first", child("conv1")),
    Value("conv2_input", FrameChannels, "What conv2 reads: the GELU of conv1's output", child("conv2", "input")),
    Value("conv2_output", SourceChannels, "conv2's output (before its GELU), one column per source position",
          child("conv2")),
    Value("position_embeddings", PositionRows, "The fixed sinusoidal table's rows, one per source position, added to "
          "every row of the batch", child("embed_positions")),
    *_ends(),
], HOST="model.encoder", KIND="encoder stack",
    RELATIONS=(_front_end, _source_embedding, _sinusoidal, _STACK, _final_norm), **ENCODER_LENS)


@relation("layers[0].layer_input == token_embeddings + position_embeddings; token_embeddings == "
          "embed_tokens.weight[input_ids]; position_embeddings == embed_positions.weight[arange(input_ids.shape[1])]: "
          "learned rows from 0, following from the ids' length alone",
          proves="token_embeddings position_embeddings",
          reads="input_ids token_embeddings position_embeddings layers[0].layer_input",
          adds=("token_embeddings", "position_embeddings", "layers[0].layer_input"))
def _target_embedding(host, r):
    ids, module = r["input_ids"], host._module
    rows = torch.arange(ids.shape[1])[None].expand(ids.shape[0], -1)
    return [(module.embed_tokens.weight[ids], r["token_embeddings"]),
            (module.embed_positions.weight[rows], r["position_embeddings"]),
            (r["token_embeddings"] + r["position_embeddings"], r["layers[0].layer_input"])]


#: ``model.decoder``: learned positions from 0, the blocks and the final norm
SpeechDecoderStack = host("SpeechDecoderStack", values=[
    Value("input_ids", Tokens, "The token ids the decoder embeds (decoder_input_ids)",
          own("input", element="input_ids"), view=READ_ONLY),
    Value("token_embeddings", Residual, "The word embedding's output, before the sum", child("embed_tokens")),
    Value("position_embeddings", Residual, "The learned position embedding's output: row p at position p, for every "
          "row of the batch", child("embed_positions")),
    *_ends(),
], HOST="model.decoder", KIND="decoder stack", RELATIONS=(_target_embedding, _STACK, _final_norm),
    **DECODER_LENS)

# -- the blocks: pre-norm, the MLP's modules the block's own ------------------------------------------------------


def _mlp_values(mid: str) -> list[Value]:
    return [
        Value("mlp_norm_output", Residual, "The normed stream entering fc1", child("post_attention_layernorm")),
        Value("mlp_input", Residual, "What fc1 is called with", child("fc1", "input")),
        Value("mlp_activation", Neurons, "The activation's output, activation_fn(fc1(mlp_input))",
              child("activation_fn")),
        Value("mlp_neurons", Neurons, "What fc2 receives: the activation itself (no gate)", child("fc2", "input")),
        Value("mlp_output", Residual, f"What the MLP adds to {mid}: fc2's output", child("fc2")),
    ]


def _mlp_relations(mid: str) -> tuple:
    @relation(f"mlp_input == mlp_norm_output == post_attention_layernorm({mid}); mlp_activation == "
              "activation_fn(fc1(mlp_input)); mlp_neurons == mlp_activation (no gate); mlp_output == fc2(mlp_neurons)",
              proves="mlp_norm_output mlp_input mlp_activation mlp_neurons",
              reads=f"{mid} mlp_norm_output mlp_input mlp_activation mlp_neurons mlp_output")
    def _mlp(host, r):
        module = host._module
        return [(module.final_layer_norm(r[mid]), r["mlp_norm_output"]), (r["mlp_norm_output"], r["mlp_input"]),
                (module.activation_fn(module.fc1(r["mlp_input"])), r["mlp_activation"]),
                (r["mlp_activation"], r["mlp_neurons"]), (module.fc2(r["mlp_neurons"]), r["mlp_output"])]

    @relation(f"{mid} + mlp_output == layer_output", proves="layer_output mlp_output",
              reads=f"{mid} mlp_output layer_output", adds=(mid, "mlp_output", "layer_output"))
    def _mlp_add(host, r):
        return [(r[mid] + r["mlp_output"], r["layer_output"])]

    return _mlp, _mlp_add


_BLOCK_HEAD = BLOCK_RELATIONS[0], BLOCK_RELATIONS[2]  # layer_input + attention add == layer_mid; the attention norm

#: ``model.encoder.layers[i]``: LayerNorm -> self-attention -> add; LayerNorm -> fc1 -> GELU -> fc2 -> add
SpeechEncoderBlock = host("SpeechEncoderBlock", Block, values=[
    Value("layer_mid", Residual, "The residual stream after the self-attention's add",
          child("post_attention_layernorm", "input"), assign_in_place=True),
    *_mlp_values("layer_mid"),
], HOST="model.encoder.layers[i]", KIND="block", MIXERS=("self_attn",),
    RELATIONS=(*_BLOCK_HEAD, *_mlp_relations("layer_mid")))


@relation("cross_attention_input == encoder_attn_layer_norm(layer_mid) == what cross_attn is called with; "
          "layer_mid + cross_attn.attention_output == cross_attention_mid",
          proves="cross_attention_input cross_attention_mid cross_attn.attention_output",
          reads="layer_mid cross_attention_input cross_attn.input cross_attn.attention_output cross_attention_mid",
          adds=("layer_mid", "cross_attn.attention_output", "cross_attention_mid"))
def _cross_add(host, r):
    module = host._module
    return [(module.encoder_attn_layer_norm(r["layer_mid"]), r["cross_attention_input"]),
            (r["cross_attention_input"], first(r["cross_attn.input"])),
            (r["layer_mid"] + r["cross_attn.attention_output"], r["cross_attention_mid"])]


#: ``model.decoder.layers[i]``: LayerNorm -> causal self-attention -> add; LayerNorm -> cross-attention to the
#: encoder's output -> add; LayerNorm -> fc1 -> GELU -> fc2 -> add
SpeechDecoderBlock = host("SpeechDecoderBlock", Block, values=[
    Value("layer_mid", Residual, "The residual stream after the self-attention's add",
          child("encoder_attn_layer_norm", "input"), assign_in_place=True),
    Value("cross_attention_input", Residual, "The cross-attention norm's output: what the cross-attention reads",
          child("encoder_attn_layer_norm")),
    Value("cross_attention_mid", Residual, "The residual stream after the cross-attention's add",
          child("post_attention_layernorm", "input"), assign_in_place=True),
    *_mlp_values("cross_attention_mid"),
], HOST="model.decoder.layers[i]", KIND="block", MIXERS=("self_attn",),
    RELATIONS=(*_BLOCK_HEAD, _cross_add, *_mlp_relations("cross_attention_mid")))

# -- the attentions: no source padding --------------------------------------------------------------------------


def _unpadded_source(shared: Relation) -> Relation:
    """``shared`` with an all-ones source mask in place of ``model.attention_mask``: the source is never padded."""
    if "model.attention_mask" not in shared.reads:
        return shared

    def compute(host, r):
        states = r["model.encoder.conv2_output"]
        ones = torch.ones(states.shape[0], states.shape[2], dtype=torch.long)
        return shared.compute(host, {**r, "model.attention_mask": ones})

    reads = [term for term in shared.reads if term != "model.attention_mask"] + ["model.encoder.conv2_output"]
    return Relation(shared.text.replace("source padding mask", "no source mask (never padded)"), shared.proves,
                    tuple(reads), compute, shared.tolerance, shared.adds, shared.exact)


def _once(module: Any) -> tuple:
    """The queries' factor is head_dim^-0.5, as the text says (the scores relations recompute with none: the host's
    SCALING is 1)."""
    return torch.tensor(module.scaling), torch.tensor(module.head_dim ** -0.5)


@relation("attention_queries == q_proj(input) · head_dim^-0.5 in heads (Whisper scales the queries, once: the scores "
          "take no factor of their own); attention_keys, attention_values == k_proj(input), v_proj(input) in heads",
          proves="",
          reads="input attention_queries attention_keys attention_values")
def _scaled_self_projections(host, r):
    module, x = host._module, first(r["input"])
    return [_once(module), (_in_heads(module, module.q_proj(x) * module.scaling), r["attention_queries"]),
            (_in_heads(module, module.k_proj(x)), r["attention_keys"]),
            (_in_heads(module, module.v_proj(x)), r["attention_values"])]


@relation("attention_queries == q_proj(input) · head_dim^-0.5 in heads (from the decoder's stream; Whisper scales the "
          "queries, once: the scores take no factor of their own); attention_keys, attention_values == "
          "k_proj(encoder_states), v_proj(encoder_states) in heads (from the encoder's normed output)",
          proves="attention_queries attention_keys attention_values",
          reads="input encoder_states attention_queries attention_keys attention_values")
def _scaled_cross_projections(host, r):
    module, x, states = host._module, first(r["input"]), r["encoder_states"]
    return [_once(module), (_in_heads(module, module.q_proj(x) * module.scaling), r["attention_queries"]),
            (_in_heads(module, module.k_proj(states)), r["attention_keys"]),
            (_in_heads(module, module.v_proj(states)), r["attention_values"])]


def _unfactored(shared: Relation) -> Relation:
    """``shared`` stated as Whisper computes it: its scores ``attention_queries · attention_keysᵀ`` with no factor,
    the queries' head_dim^-0.5 applied once, in the projection (the attention call's scaling is 1, `_QUERY_SCALED`)."""
    if "attention_keysᵀ · scaling" not in shared.text:
        return shared
    text = shared.text.replace("attention_keysᵀ · scaling", "attention_keysᵀ") + \
        "; the scores take no factor: the queries already carry head_dim^-0.5"
    return dataclasses.replace(shared, text=text)


def _scaled(relations: tuple, unscaled: Relation, scaled: Relation) -> tuple:
    return tuple(scaled if rel is unscaled else _unfactored(_unpadded_source(rel)) for rel in relations)


#: Whisper's attentions scale the queries, not the scores: the attention call's scaling is 1
_QUERY_SCALED = {"SCALING": staticmethod(lambda module: 1.0), "WEIGHTS": Layout(query_scale="scaling")}
SpeechEncoderSelfAttention = host("SpeechEncoderSelfAttention", Attention, HOST="model.encoder.layers[i].self_attn",
                                  RELATIONS=_scaled(ENCODER_SELF_RELATIONS, ENCODER_SELF_RELATIONS[-1],
                                                    _scaled_self_projections),
                                  MASK=staticmethod(padding_mask), **_QUERY_SCALED)
SpeechDecoderSelfAttention = host("SpeechDecoderSelfAttention", DecoderSelfAttention,
                                  RELATIONS=_scaled(DECODER_SELF_RELATIONS, DECODER_SELF_RELATIONS[-1],
                                                    _scaled_self_projections), **_QUERY_SCALED)
#: a cross-attention's keys and values are over the source positions, its queries over the target's
SourceKeys = layout("Keys", "batch num_kv_heads source qk_head_dim")
SourceValues = layout("Values", "batch num_kv_heads source head_dim")
SourceStream = layout("Residual", "batch source hidden_size")


def _over_the_source(name: str, over: Any) -> Value:
    return dataclasses.replace(next(v for v in CrossAttention.values() if v.name == name), layout=over)


_FROM_THE_ENCODER = CROSS_RELATIONS[0]  # the encoder's last block: Whisper's cross-attention reads its final norm


@relation("encoder_states == model.encoder.stack_output: the cross-attention reads the encoder's final norm's "
          "output", proves="encoder_states", reads="encoder_states model.encoder.stack_output")
def _from_the_encoder_norm(host, r):
    return [(r["model.encoder.stack_output"], r["encoder_states"])]
  # the stack's last block: Whisper's cross-attention reads its final norm
SPEECH_CROSS_RELATIONS = _scaled((_from_the_encoder_norm, *(rel for rel in CROSS_RELATIONS if rel is not _FROM_THE_ENCODER)),
                                 CROSS_RELATIONS[1], _scaled_cross_projections)
#: ``model.decoder.layers[i].cross_attn``: the encoder's normed output in, keys and values over the source
SpeechCrossAttention = host("SpeechCrossAttention", CrossAttention, values=[
    _over_the_source("encoder_states", SourceStream), _over_the_source("attention_keys", SourceKeys),
    _over_the_source("attention_values", SourceValues)],
    RELATIONS=SPEECH_CROSS_RELATIONS, **_QUERY_SCALED)

# -- the root ---------------------------------------------------------------------------------------------------


@relation("lm_head_output == decoder.stack_output @ decoder.embed_tokens.weightᵀ (the head tied to the word "
          "embeddings, no bias); logits == lm_head_output (nothing past the head)",
          proves="lm_head_output logits", reads="decoder.stack_output lm_head_output logits")
def _tied_head(host, r):
    head = host.lm_head._module
    tied = float(head.weight.data_ptr() == host._module.get_decoder().embed_tokens.weight.data_ptr())
    return [(r["decoder.stack_output"] @ head.weight.T, r["lm_head_output"]), (r["lm_head_output"], r["logits"]),
            (torch.tensor(1.0), torch.tensor(tied))]


@relation("encoder.input_features == input_features; decoder.input_ids == decoder_input_ids: each stack reads what "
          "the model was called with", proves="input_features decoder_input_ids encoder.input_features "
          "decoder.input_ids", reads="input_features decoder_input_ids encoder.input_features decoder.input_ids")
def _inputs(host, r):
    return [(r["input_features"], r["encoder.input_features"]), (r["decoder_input_ids"], r["decoder.input_ids"])]


_encoder_to_decoder = SEQ2SEQ_ROOT_RELATIONS[3]  # every cross-attention reads encoder.stack_output (its norm's)


@relation("unembed(decoder.layers[-1].layer_output) == logits: the lens (model.unembed) applies the decoder's final "
          "norm and the tied head", proves="", reads="decoder.layers[-1].layer_output logits")
def _lens(host, r):
    return [(host.unembed(first(r["decoder.layers[-1].layer_output"])), r["logits"])]


def decoder_norm(model: Any, stream: Any) -> Any:
    """The lens's step before the head (a family's ``before_the_head``): the decoder's final LayerNorm."""
    return model.decoder.norm(stream)


SPEECH_ROOT_RELATIONS = (_inputs, _encoder_to_decoder, _tied_head, _lens)
SPEECH_ROOT_VALUES = [
    SEQ2SEQ_ROOT_VALUES[0],  # logits: the decoder's scores at every target position
    Value("lm_head_output", Logits, "The tied head's scores", child("lm_head")),
    Value("input_features", Features, "The log-mel features the model was called with",
          own("input", element="input_features"), view=READ_ONLY),
    Value("decoder_input_ids", Tokens, "The target ids the model was called with",
          own("input", element="decoder_input_ids"), view=READ_ONLY),
]


def speech_root(name: str, family_module: Any) -> type:
    """A speech encoder-decoder's root host class: its stacks hosts of their own, their final norms inside them."""
    return host(name, StandardModel, values=SPEECH_ROOT_VALUES, FINAL_NORM=False, family_module=family_module,
                RELATIONS=SPEECH_ROOT_RELATIONS,
                num_kv_heads=property(lambda model: model.text_config.num_attention_heads))


def speech_rename() -> dict[str, str]:
    """Whisper's mounts: the stacks at the root, the pre-norm block norms and each stack's final norm by standard
    names, the cross-attention as cross_attn and the head as lm_head."""
    return {"model.encoder": "encoder", "model.decoder": "decoder", "self_attn_layer_norm": "input_layernorm",
            "final_layer_norm": "post_attention_layernorm", "layer_norm": "norm", "encoder_attn": "cross_attn",
            "out_proj": "o_proj", "proj_out": "lm_head"}


SPEECH_PATHS = ("encoder", "decoder", "lm_head", "encoder.conv1", "encoder.conv2", "encoder.embed_positions",
                "encoder.layers", "encoder.norm", "encoder.layers.0.input_layernorm", "encoder.layers.0.self_attn",
                "encoder.layers.0.post_attention_layernorm", "encoder.layers.0.fc1", "decoder.embed_tokens",
                "decoder.embed_positions", "decoder.layers", "decoder.norm", "decoder.layers.0.cross_attn",
                "decoder.layers.0.fc1")

# -- the call: a fixed clip through the feature extractor, and a transcript's opening ----------------------------

#: the task tokens a transcript opens with (Whisper's decoder prompt), then the text
TRANSCRIPT_OPENING = "<|startoftranscript|><|en|><|transcribe|><|notimestamps|>"


def clips(model: Any, rows: int = 2) -> list[Any]:
    """``rows`` deterministic clips half the extractor's window long: a tone each, 220 Hz apart."""
    extractor = model.feature_extractor
    seconds = torch.arange(extractor.n_samples // 2) / extractor.sampling_rate
    return [(0.5 * torch.sin(2 * math.pi * (440 + 220 * row) * seconds)).numpy() for row in range(rows)]


def speech_inputs(model: Any, texts: tuple[str, ...] = ("the river ran low", "a quiet machine")) -> tuple[tuple, dict]:
    """What a trace of a speech model is called with: the feature extractor's output of :func:`clips` and
    ``decoder_input_ids``, the transcript opening then each text, cut to the shortest (no target padding)."""
    features = model.feature_extractor(clips(model, len(texts)), sampling_rate=model.feature_extractor.sampling_rate,
                                       return_tensors="pt")
    rows = [model.tokenizer(TRANSCRIPT_OPENING + text, add_special_tokens=False)["input_ids"] for text in texts]
    length = min(len(row) for row in rows)
    # in the model's dtype, as a caller of a bfloat16 or float16 load passes them (the extractor gives float32)
    return (), {"input_features": features["input_features"].to(model._module.dtype),
                "decoder_input_ids": torch.tensor([row[:length] for row in rows])}


def input_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The sizes of a call: the target's batch and seq, the features' frames."""
    batch, seq = kwargs["decoder_input_ids"].shape
    return {"batch": batch, "seq": seq, "query": seq, "key": seq, "frames": kwargs["input_features"].shape[-1]}


def host_sizes(kind: str, sizes: dict[str, int]) -> dict[str, int]:
    """The encoder's values are over its source positions; a cross-attention's keys too."""
    config_source = sizes["frames"] // 2
    if kind.startswith("model.encoder"):
        return {"seq": config_source, "query": config_source, "key": config_source}
    if ".cross_attn" in kind:
        return {"key": config_source, "source": config_source}
    return {}
