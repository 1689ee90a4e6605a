"""BART (BartForConditionalGeneration, model_type bart): an encoder-decoder, a bidirectional encoder and a causal
decoder that cross-attends to the encoder's final output, both post-norm, with a head tied to the embeddings.

Two stacks under one model: ``model.encoder.layers[i]`` and ``model.decoder.layers[i]``, each stack a host of its
own (``model.encoder``, ``model.decoder``) with its ids, ``token_embeddings``, ``position_embeddings`` and
``embedding_norm_output`` (the LayerNorm of their sum, ``layernorm_embedding`` mounted as ``embed_layernorm``), and
``stack_output``. Positions are learned, and the table starts 2 rows in: position p reads row p + 2 (fairseq's
padding rows). There is no final norm in either stack: each block is post-norm.

An encoder block: ``layer_mid = layer_input + self_attn.attention_output`` is normed (``self_attn_layer_norm``)
into ``mlp_norm_output``, which fc1 reads (GELU, then fc2) and fc2's output is added to, and that sum is normed
(``final_layer_norm``) into ``layer_output``. The self-attention has no causal mask: only the source's padding (on
the right) is masked. A decoder block's self-attention is causal; its add's LayerNorm, ``cross_attention_input``,
is what the cross-attention (``encoder_attn`` mounted as ``cross_attn``) reads its queries from, its keys and values
made from the encoder's final output (``cross_attn.encoder_states``); ``cross_attention_mid`` is that add, and its
LayerNorm (``encoder_attn_layer_norm``) is ``mlp_norm_output``. All three attentions are one module class
(``BartAttention``: q_proj, k_proj, v_proj and out_proj, mounted as o_proj, all with biases), told apart by path.

The head: ``lm_head`` (tied to the word embeddings of both stacks, no bias) reads the decoder's output, and the
model adds ``final_logits_bias`` (a buffer) to its logits. A trace takes what the model takes: ``input_ids`` (a
prompt, ids or the tokenizer's output) and, optionally, ``decoder_input_ids``; without them the model shifts
``input_ids`` one to the right behind ``decoder_start_token_id``. It loads under the feature-extraction pipeline
(``TEXT_TASK``), whose preprocessing only tokenizes.
"""

from __future__ import annotations

import sys

from transformers.models.bart import modeling_bart as hf

from ..parts.attention.cross_attention import CrossAttention, DecoderSelfAttention, EncoderSelfAttention
from ..parts.blocks.decoder import nothing_to_prepare, text_only

# the stacks, block kinds, MLP width and the lens's step past the head: every BART-style family's alike
from ..parts.encoders.seq2seq import STACKS as STACKS
from ..parts.encoders.seq2seq import (
    DecoderBlock,
    DecoderStack,
    EncoderBlock,
    EncoderStack,
    required_paths_of,
    seq2seq_rename,
    seq2seq_root,
)
from ..parts.encoders.seq2seq import dim_sizes as dim_sizes
from ..parts.encoders.seq2seq import layer_types as layer_types
from ..parts.encoders.seq2seq import past_the_head as past_the_head

FAMILY = "bart"
MODEL_TYPES = ("bart",)
#: the pipeline of a text load: its preprocessing only tokenizes (text2text-generation's would generate)
TEXT_TASK = "feature-extraction"
RENAME = seq2seq_rename()

#: one attention class in three places: the stacks' self-attentions and the cross-attention, by path
ENVOYS = {hf.BartEncoder: EncoderStack, hf.BartDecoder: DecoderStack, hf.BartEncoderLayer: EncoderBlock,
          hf.BartDecoderLayer: DecoderBlock, "encoder.layers.*.self_attn": EncoderSelfAttention,
          "decoder.layers.*.self_attn": DecoderSelfAttention, "cross_attn": CrossAttention}

ROOT = seq2seq_root("BartStandardModel", sys.modules[__name__])

build = text_only(hf.BartForConditionalGeneration)
prepare = nothing_to_prepare
required_paths = required_paths_of()
