"""XLM-RoBERTa (XLMRobertaForMaskedLM, model_type xlm-roberta): RoBERTa's architecture, trained on a hundred
languages, with a SentencePiece unigram tokenizer of 250,002 pieces.

Everything past the tokenizer is RoBERTa's (`nncanon.families.roberta`), under transformers' XLMRoberta classes:
bidirectional multi-head attention with only the right padding masked, post-norm blocks (``layer_mid`` the
attention's add before ``attention.output.LayerNorm``, ``layer_output`` the LayerNorm of the MLP's add), no final
norm, positions numbered per row past the padding row (a real token's row ``pad_token_id`` plus its count among
its row's real tokens, the first 2; padding row 1), one token type row, and the MLM head as one ``lm_head``
(dense, GELU, ``layer_norm``, then the decoder tied to the word embeddings). The root's relations are RoBERTa's,
proven again here on this family's own classes.

The tokenizer is SentencePiece's unigram (``XLMRobertaTokenizer``): whitespace split, ``▁`` before every word,
each word cut into the most probable pieces; ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3 (fairseq's order, the
SentencePiece ids shifted past them), ``<mask>`` last. It frames a text as ``<s> A </s>`` and a pair as
``<s> A </s></s> B </s>``, passes no token types and pads on the right. The vocabulary is most of the parameters:
250,002 rows of the embedding (and the tied decoder) against 12 blocks in xlm-roberta-base.

A trace takes a prompt, a list of prompts, ids, or the tokenizer's output for a pair, under transformers'
feature-extraction pipeline (``TEXT_TASK``): there is no ``generate`` and no next token.

Native names (``roberta.embeddings.*``, ``roberta.encoder.layer[i]`` with ``attention``) are mounted on the
standard ones (``embed_tokens``, ``embed_token_types``, ``embed_positions``, ``embed_layernorm``, ``layers[i]``
with ``self_attn``); ``lm_head`` keeps its name.
"""

from __future__ import annotations

import sys

from transformers.models.xlm_roberta import modeling_xlm_roberta as hf

from ..parts.blocks.decoder import attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.text_family import intermediate_dims
from ..parts.encoders.bidirectional import EncoderAttention
from ..parts.encoders.embeddings import (
                                         ROBERTA_HEAD,
                                         encoder_rename,
                                         encoder_root,
                                         past_the_padding_row_root,
                                         roberta_paths,
)
from ..parts.encoders.post_norm import PostNormBlock

FAMILY = "xlm_roberta"
MODEL_TYPES = ("xlm-roberta",)
#: the pipeline of a text load: an encoder has no text-generation
TEXT_TASK = "feature-extraction"
RENAME = encoder_rename("roberta")  # XLMRobertaForMaskedLM keeps RoBERTa's backbone name

ENVOYS = {hf.XLMRobertaLayer: PostNormBlock, hf.XLMRobertaAttention: EncoderAttention}

ROOT = encoder_root("XLMRobertaStandardModel", sys.modules[__name__], *past_the_padding_row_root(ROBERTA_HEAD))

build = text_only(hf.XLMRobertaForMaskedLM)
layer_types = attention_layer_types  # no layer_types: full (bidirectional) attention on every block
prepare = nothing_to_prepare
dim_sizes = intermediate_dims
required_paths = roberta_paths
