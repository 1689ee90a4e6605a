"""mBART (MBartForConditionalGeneration, model_type mbart): BART's encoder-decoder made pre-norm, the multilingual
denoising model of mBART-25 and mBART-50. A LayerNorm before each sublayer, a final LayerNorm (``layer_norm``) closing
each stack, the LayerNorm of the embeddings' sum kept from BART, and the word embeddings scaled by sqrt(d_model).

Two stacks under one model, as BART's: ``model.encoder.layers[i]`` and ``model.decoder.layers[i]``, each stack a host
of its own with its ids, ``token_embeddings`` (times ``embed_scale``), ``position_embeddings`` (learned, position p
reading row p + 2), ``embedding_norm_output`` (``layernorm_embedding`` mounted as ``embed_layernorm``),
``final_norm_output`` and ``stack_output`` (the same tensor: the stack returns its final LayerNorm).

An encoder block: ``attention_norm_output`` (``self_attn_layer_norm`` of ``layer_input``) is what the self-attention
reads, its output added to ``layer_input`` into ``layer_mid``; ``mlp_norm_output`` (``final_layer_norm`` of
``layer_mid``) is what fc1 reads (GELU, then fc2), and fc2's output is added to ``layer_mid`` into ``layer_output``.
A decoder block's self-attention is causal; between its two sublayers ``cross_attention_input``
(``encoder_attn_layer_norm`` of ``layer_mid``) is what the cross-attention reads its queries from, its keys and values
made from the encoder's output (its final LayerNorm's), and ``cross_attention_mid`` its add, which the MLP's
LayerNorm reads. All three attentions are one class (``MBartAttention``), told apart by path.

The head: ``lm_head`` (tied to the word embeddings) reads the decoder's output, plus ``final_logits_bias``. Without
``decoder_input_ids`` the model shifts ``input_ids`` one to the right and wraps the last real token (mBART's language
id, fairseq's layout; ``</s>`` for a text framed without one) to the front: mBART has no single
``decoder_start_token_id``. It loads under the feature-extraction pipeline (``TEXT_TASK``).
"""

from __future__ import annotations

import sys

import torch
from transformers.models.mbart import modeling_mbart as hf

from ..core.relations import relation
from ..parts.attention.cross_attention import (
    DecoderSelfAttention,
    EncoderSelfAttention,
    PreNormCrossAttention,
)
from ..parts.blocks.decoder import nothing_to_prepare, text_only
from ..parts.encoders.seq2seq import (
    SEQ2SEQ_ROOT_RELATIONS,
    _embedding_relation,
    _shifted,
    required_paths_of,
    seq2seq_rename,
    seq2seq_root,
)

# the stacks, block kinds, MLP width and the lens's step past the head: every BART-style family's alike
from ..parts.encoders.seq2seq import STACKS as STACKS
from ..parts.encoders.seq2seq import dim_sizes as dim_sizes
from ..parts.encoders.seq2seq import layer_types as layer_types
from ..parts.encoders.seq2seq import past_the_head as past_the_head
from ..parts.encoders.seq2seq_pre_norm import (
    PRE_NORM_LENS,
    PreNormDecoderBlock,
    PreNormEncoderBlock,
    pre_norm_stacks,
)

FAMILY = "mbart"
MODEL_TYPES = ("mbart",)
#: the pipeline of a text load: its preprocessing only tokenizes (text2text-generation's would generate)
TEXT_TASK = "feature-extraction"
RENAME = seq2seq_rename()

EncoderStack, DecoderStack = pre_norm_stacks(_embedding_relation(2, scaled=True))
ENVOYS = {hf.MBartEncoder: EncoderStack, hf.MBartDecoder: DecoderStack, hf.MBartEncoderLayer: PreNormEncoderBlock,
          hf.MBartDecoderLayer: PreNormDecoderBlock, "encoder.layers.*.self_attn": EncoderSelfAttention,
          "decoder.layers.*.self_attn": DecoderSelfAttention, "cross_attn": PreNormCrossAttention}


@relation("decoder.input_ids == input_ids shifted one to the right, the last real (non-pad) token of each row wrapped "
          "to the front (mBART's language id; pad_token_id in place of -100): what the decoder embeds when the call "
          "passes no decoder_input_ids", proves="decoder.input_ids", reads="input_ids decoder.input_ids")
def _wrapped(host, r):
    ids = r["input_ids"].masked_fill(r["input_ids"] == -100, host.text_config.pad_token_id)
    last = ids.ne(host.text_config.pad_token_id).sum(dim=1) - 1
    shifted = torch.empty_like(ids)
    shifted[:, 1:] = ids[:, :-1]
    shifted[:, 0] = ids.gather(1, last[:, None])[:, 0]
    return [(shifted, r["decoder.input_ids"])]


ROOT = seq2seq_root("MBartStandardModel", sys.modules[__name__], relations=tuple(
    _wrapped if rel is _shifted else PRE_NORM_LENS if rel is SEQ2SEQ_ROOT_RELATIONS[-1] else rel
    for rel in SEQ2SEQ_ROOT_RELATIONS))

build = text_only(hf.MBartForConditionalGeneration)
prepare = nothing_to_prepare
required_paths = required_paths_of("encoder.layer_norm", "decoder.layer_norm")
