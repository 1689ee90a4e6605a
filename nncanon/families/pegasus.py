"""Pegasus (PegasusForConditionalGeneration, model_type pegasus): the summarization encoder-decoder pre-trained by
gap-sentence generation; BART's two stacks made pre-norm (mBART's blocks), with a fixed sinusoid table for positions,
the word embeddings scaled by sqrt(d_model) in each stack's forward, and no LayerNorm on the embeddings.

Two stacks under one model: ``model.encoder.layers[i]`` and ``model.decoder.layers[i]``, each stack a host of its own
with its ids, ``token_embeddings`` (the word embedding's output, before the stack scales it), ``position_embeddings``
(row p of the sinusoid table at position p: sin on the first half of the features, cos on the rest, one row per
position shared by the batch), ``final_norm_output`` and ``stack_output`` (the same tensor: each stack returns its
final LayerNorm, ``layer_norm``). ``embedding_norm_output`` does not exist: the first block reads the scaled sum.

The blocks are mBART's (`nncanon.parts.encoders.seq2seq_pre_norm`): a LayerNorm before the self-attention
(``attention_norm_output``), the add (``layer_mid``); in a decoder block a LayerNorm before the cross-attention
(``cross_attention_input``, its queries; its keys and values from the encoder's output), the add
(``cross_attention_mid``); a LayerNorm before fc1 -> ReLU -> fc2 (``mlp_norm_output``), the add (``layer_output``).
All three attentions are one class (``PegasusAttention``), told apart by path.

The head: ``lm_head`` (tied to the word embeddings) reads the decoder's output, plus ``final_logits_bias``. Without
``decoder_input_ids`` Pegasus's model raises (BART's shifts ``input_ids``): the family's ``prepare`` hooks the model to
pass BART's shift, ``input_ids`` one to the right behind ``decoder_start_token_id`` (``<pad>``, 0), as
TransformerBridge does.
It loads under the feature-extraction pipeline (``TEXT_TASK``).
"""

from __future__ import annotations

import sys

from transformers.models.pegasus import modeling_pegasus as hf

from ..parts.attention.cross_attention import (
    DecoderSelfAttention,
    EncoderSelfAttention,
    PreNormCrossAttention,
)
from ..parts.blocks.decoder import text_only
from ..parts.encoders.seq2seq import (
    SEQ2SEQ_ROOT_RELATIONS,
    required_paths_of,
    seq2seq_rename,
    seq2seq_root,
    shift_input_ids,
    sinusoid_stacks,
)

# the stacks, block kinds, MLP width and the lens's step past the head: every BART-style family's alike
from ..parts.encoders.seq2seq import STACKS as STACKS
from ..parts.encoders.seq2seq import dim_sizes as dim_sizes
from ..parts.encoders.seq2seq import layer_types as layer_types
from ..parts.encoders.seq2seq import past_the_head as past_the_head
from ..parts.encoders.seq2seq_pre_norm import (
    FINAL_NORM,
    PRE_NORM_LENS,
    PreNormDecoderBlock,
    PreNormEncoderBlock,
    final_norm,
)

FAMILY = "pegasus"
MODEL_TYPES = ("pegasus",)
#: the pipeline of a text load: its preprocessing only tokenizes (text2text-generation's would generate)
TEXT_TASK = "feature-extraction"
RENAME = seq2seq_rename()

EncoderStack, DecoderStack = sinusoid_stacks("PreNormSinusoid", (final_norm,), (FINAL_NORM,))
ENVOYS = {hf.PegasusEncoder: EncoderStack, hf.PegasusDecoder: DecoderStack,
          hf.PegasusEncoderLayer: PreNormEncoderBlock, hf.PegasusDecoderLayer: PreNormDecoderBlock,
          "encoder.layers.*.self_attn": EncoderSelfAttention, "decoder.layers.*.self_attn": DecoderSelfAttention,
          "cross_attn": PreNormCrossAttention}

ROOT = seq2seq_root("PegasusStandardModel", sys.modules[__name__],
                    relations=(*SEQ2SEQ_ROOT_RELATIONS[:-1], PRE_NORM_LENS))

build = text_only(hf.PegasusForConditionalGeneration)
prepare = shift_input_ids  # Pegasus's model, unlike BART's, does not shift input_ids itself
required_paths = required_paths_of("encoder.layer_norm", "decoder.layer_norm", embedding_norm=False)
