"""Whisper (WhisperForConditionalGeneration, model_type whisper): a speech encoder-decoder, a bidirectional encoder
over log-mel features and a causal decoder that cross-attends to the encoder's final output, both pre-norm with a
final LayerNorm per stack, and a head tied to the decoder's word embeddings.

The encoder (``model.encoder``) reads ``input_features`` ``[batch, num_mel_bins, frames]``: ``conv1`` (kernel 3) and
``conv2`` (kernel 3, stride 2), each followed by a GELU, turn the frames into ``max_source_positions`` source
positions ``hidden_size`` wide, to which the fixed sinusoidal table (``embed_positions``, not trained) adds one row
per position. The decoder (``model.decoder``) embeds ``decoder_input_ids`` plus a learned position row from 0.

A block is pre-norm: ``self_attn_layer_norm`` (mounted as ``input_layernorm``) -> self-attention -> add, then (the
decoder's) ``encoder_attn_layer_norm`` -> cross-attention (``encoder_attn`` mounted as ``cross_attn``) -> add, then
``final_layer_norm`` (``post_attention_layernorm``) -> fc1 -> GELU -> fc2 -> add. Each stack ends in its own
LayerNorm (``layer_norm``, mounted as ``norm``): the cross-attention reads the encoder's normed output, and the head
(``proj_out``, mounted as ``lm_head``, tied to the decoder's word embeddings) the decoder's. All three attentions are
one module class (``WhisperAttention``: q_proj, k_proj without a bias, v_proj and out_proj mounted as o_proj), told
apart by path. A trace takes what the model takes: ``input_features`` (the feature extractor's output, or the
tensor) and ``decoder_input_ids``; the model does not shift anything for you.
"""

from __future__ import annotations

import sys

from transformers.models.whisper import modeling_whisper as hf

from ..core.model import StandardModel
from ..parts.blocks.decoder import nothing_to_prepare
from ..parts.encoders.speech import (
    SPEECH_PATHS,
    SpeechCrossAttention,
    SpeechDecoderBlock,
    SpeechDecoderSelfAttention,
    SpeechDecoderStack,
    SpeechEncoderBlock,
    SpeechEncoderSelfAttention,
    SpeechEncoderStack,
    decoder_norm,
    host_sizes,
    input_sizes,
    speech_inputs,
    speech_rename,
    speech_root,
)

FAMILY = "whisper"
MODEL_TYPES = ("whisper",)
#: the pipeline of the load: its preprocessing runs nothing on a tensor input
TEXT_TASK = "feature-extraction"
RENAME = speech_rename()

ENVOYS = {hf.WhisperEncoder: SpeechEncoderStack, hf.WhisperDecoder: SpeechDecoderStack,
          hf.WhisperEncoderLayer: SpeechEncoderBlock, hf.WhisperDecoderLayer: SpeechDecoderBlock,
          "encoder.layers.*.self_attn": SpeechEncoderSelfAttention,
          "decoder.layers.*.self_attn": SpeechDecoderSelfAttention,
          "cross_attn": SpeechCrossAttention}

ROOT = speech_root("WhisperStandardModel", sys.modules[__name__])
STACKS = ("encoder", "decoder")
before_the_head = decoder_norm
__all__ = ["host_sizes", "input_sizes", "speech_inputs"]  # the generator's hooks: the call and its sizes


def build(checkpoint, task: str, **hf_kwargs):
    """WhisperForConditionalGeneration from a local checkpoint, with its tokenizer and feature extractor."""
    from transformers import WhisperFeatureExtractor, WhisperTokenizer

    from ..parts import loading

    loading.check_task(task)
    if task != "text-generation":
        raise ValueError(f"task={task!r}: whisper loads with task='text-generation' (the default)")
    module = loading.pretrained(hf.WhisperForConditionalGeneration, checkpoint, **hf_kwargs)
    return module, {"tokenizer": WhisperTokenizer.from_pretrained(checkpoint),
                    "feature_extractor": WhisperFeatureExtractor.from_pretrained(checkpoint)}


build.causal_lm = hf.WhisperForConditionalGeneration


def layer_types(model: StandardModel) -> list[str]:
    """The kind of every block, the encoder's then the decoder's (``STACKS``)."""
    config = model.text_config
    return ["encoder_block"] * config.encoder_layers + ["decoder_block"] * config.decoder_layers


prepare = nothing_to_prepare


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.encoder_ffn_dim, "num_mel_bins": model.text_config.num_mel_bins,
            "frames": 2 * model.text_config.max_source_positions}


def required_paths(model: StandardModel) -> list[str]:
    return list(SPEECH_PATHS)
