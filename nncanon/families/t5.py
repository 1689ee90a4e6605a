"""T5 (T5ForConditionalGeneration, model_type t5): an encoder-decoder, a bidirectional encoder and a causal decoder
that cross-attends to the encoder's final output, both pre-norm with T5's RMS norm (no mean subtracted, no bias), a
final norm per stack, relative position buckets in place of any position embedding, and a head tied to the
embeddings that reads the decoder's output rescaled by d_model^-0.5.

Two stacks under one model: ``model.encoder.layers[i]`` and ``model.decoder.layers[i]`` (``block[i]`` mounted),
each stack a host of its own (``model.encoder``, ``model.decoder``) with its ids, ``token_embeddings`` (the shared
word embedding's output, unscaled, what enters the first block), ``final_norm_output`` (its ``final_layer_norm``)
and ``stack_output``. A block is a list of sublayers, each normed on its way in and added back: ``layer[0]`` the
self-attention (``SelfAttention`` mounted as ``self_attn``), on the decoder ``layer[1]`` the cross-attention
(``EncDecAttention`` as ``cross_attn``: queries from ``cross_attention_norm_output``, keys and values from the
encoder's output, ``cross_attn.encoder_states``), then the MLP (``DenseReluDense`` as ``mlp``: ``wi``, ReLU, ``wo``
mounted as ``down_proj``). ``layer_mid`` is the self-attention's add, ``cross_attention_mid`` the cross-attention's.

Positions: the first block of each stack holds ``relative_attention_bias``, a learned scalar per head for each
bucket of the key's offset from the query (half the buckets exact offsets, half logarithmic up to
``relative_attention_max_distance``; the encoder's buckets tell keys after the query from keys before it, the
decoder's see only the past). It computes the bias once, and every block of its stack adds that same tensor to its
scores: ``self_attn.attention_position_bias``, proven on the stack's host from the bucket rule. The scores are not
scaled by 1/√d_kv (T5 folds it into the init): ``attention_scores == attention_queries · attention_keysᵀ +
attention_position_bias + mask``. The cross-attention has no bias.

The head: ``lm_head`` (tied to ``shared``, the word embedding of both stacks) reads the decoder's output times
d_model^-0.5, a step past the stack the lens applies (``before_the_head``: the decoder's final norm, then the
rescale). A trace takes what the model takes: ``input_ids`` and, optionally, ``decoder_input_ids``; without them the
model shifts ``input_ids`` one to the right behind ``decoder_start_token_id`` (T5's pad token, 0). It loads under the
feature-extraction pipeline (``TEXT_TASK``), whose preprocessing only tokenizes.
"""

from __future__ import annotations

import sys

from transformers.models.t5 import modeling_t5 as hf

from ..parts.blocks.decoder import nothing_to_prepare, text_only
from ..parts.blocks.ungated import ungated_mlp
from ..parts.encoders.pre_norm_seq2seq import (
    before_the_head,
    pre_norm_dim_sizes,
    pre_norm_envoys,
    pre_norm_layer_types,
    pre_norm_rename,
    pre_norm_required_paths,
    pre_norm_root,
    shift_when_missing,
)

FAMILY = "t5"
MODEL_TYPES = ("t5",)
#: the pipeline of a text load: its preprocessing only tokenizes (text2text-generation's would generate)
TEXT_TASK = "feature-extraction"
RENAME = pre_norm_rename({"wo": "down_proj", "act": "act_fn"})

ENVOYS = pre_norm_envoys(hf.T5DenseActDense, ungated_mlp("wi"))

ROOT = pre_norm_root("T5StandardModel", sys.modules[__name__])

build = text_only(hf.T5ForConditionalGeneration)
STACKS = ("encoder", "decoder")
before_the_head = before_the_head  # the lens: the decoder's final norm, then the rescale by d_model^-0.5
decoder_inputs = shift_when_missing  # a call with no decoder_input_ids decodes input_ids shifted right

layer_types = pre_norm_layer_types  # the encoder's blocks, then the decoder's
prepare = nothing_to_prepare
dim_sizes = pre_norm_dim_sizes
required_paths = pre_norm_required_paths
