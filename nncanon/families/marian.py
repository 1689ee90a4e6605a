"""Marian (MarianMTModel, model_type marian): the OPUS-MT translation models, BART's post-norm encoder-decoder with a
fixed sinusoid table for positions, the word embeddings scaled by sqrt(d_model) in each stack's forward, and no
LayerNorm on the embeddings.

Two stacks under one model: ``model.encoder.layers[i]`` and ``model.decoder.layers[i]``, each stack a host of its own
with its ids, ``token_embeddings`` (the word embedding's output, before the stack scales it), ``position_embeddings``
(row p of the sinusoid table at position p: sin on the first half of the features, cos on the rest, one row per
position shared by the batch) and ``stack_output``. There is no LayerNorm on the embeddings and no final norm: each
block is BART's post-norm block, ending in its own LayerNorm.

The blocks are BART's (`nncanon.parts.encoders.seq2seq`): ``layer_mid`` (the self-attention's add) normed into
``mlp_norm_output`` in an encoder block, into ``cross_attention_input`` in a decoder block, whose cross-attention
reads the encoder's final output; fc1 -> SiLU (swish) -> fc2, added and normed into ``layer_output``. All three
attentions are one class (``MarianAttention``), told apart by path.

The head: ``lm_head`` (tied to the shared word embeddings) reads the decoder's output, plus ``final_logits_bias``.
Without ``decoder_input_ids`` Marian's model raises (BART's shifts ``input_ids``): the family's ``prepare`` hooks the
model to pass BART's shift, ``input_ids`` one to the right behind ``decoder_start_token_id`` (``<pad>``, the last id),
as TransformerBridge does. It loads under the feature-extraction pipeline (``TEXT_TASK``).
"""

from __future__ import annotations

import sys

from transformers.models.marian import modeling_marian as hf

from ..parts.attention.cross_attention import CrossAttention, DecoderSelfAttention, EncoderSelfAttention
from ..parts.blocks.decoder import text_only

# the stacks, block kinds, MLP width and the lens's step past the head: every BART-style family's alike
from ..parts.encoders.seq2seq import STACKS as STACKS
from ..parts.encoders.seq2seq import (
    DecoderBlock,
    EncoderBlock,
    _stack_output,
    required_paths_of,
    seq2seq_rename,
    seq2seq_root,
    shift_input_ids,
    sinusoid_stacks,
)
from ..parts.encoders.seq2seq import dim_sizes as dim_sizes
from ..parts.encoders.seq2seq import layer_types as layer_types
from ..parts.encoders.seq2seq import past_the_head as past_the_head

FAMILY = "marian"
MODEL_TYPES = ("marian",)
#: the pipeline of a text load: its preprocessing only tokenizes (text2text-generation's would generate)
TEXT_TASK = "feature-extraction"
RENAME = seq2seq_rename()

EncoderStack, DecoderStack = sinusoid_stacks("Sinusoid", (_stack_output,))
ENVOYS = {hf.MarianEncoder: EncoderStack, hf.MarianDecoder: DecoderStack, hf.MarianEncoderLayer: EncoderBlock,
          hf.MarianDecoderLayer: DecoderBlock, "encoder.layers.*.self_attn": EncoderSelfAttention,
          "decoder.layers.*.self_attn": DecoderSelfAttention, "cross_attn": CrossAttention}

ROOT = seq2seq_root("MarianStandardModel", sys.modules[__name__])

build = text_only(hf.MarianMTModel)
prepare = shift_input_ids  # Marian's model, unlike BART's, does not shift input_ids itself
required_paths = required_paths_of(embedding_norm=False)
