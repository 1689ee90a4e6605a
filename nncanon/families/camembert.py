"""CamemBERT (CamembertForMaskedLM, model_type camembert): RoBERTa's architecture trained on French text, with a
SentencePiece unigram tokenizer whose fairseq dictionary puts unused copies of the special tokens first.

Past the tokenizer the model is RoBERTa's (`nncanon.families.roberta`; what the families share is
`nncanon.parts.encoders.roberta_style`), under transformers' Camembert classes: post-norm blocks around
bidirectional attention, no final norm, positions past the padding row, one token type row and the tied MLM head
``lm_head``. RoBERTa's root relations are proven again on these classes.

The tokenizer (``CamembertTokenizer``) is SentencePiece's unigram, ``▁`` before every word, over the fairseq
dictionary of the original release: ``<s>NOTUSED`` 0, ``<pad>`` 1, ``</s>NOTUSED`` 2, ``<unk>`` 3, then the
SentencePiece model's own ``<unk>`` (``<unk>NOTUSED``, 4), ``<s>`` 5 and ``</s>`` 6, the pieces, and ``<mask>``
last. So camembert-base's ``bos_token_id`` is 5 and its ``eos_token_id`` 6, not RoBERTa's 0 and 2, while the
padding row stays 1. It frames a text as ``<s> A </s>`` and a pair as ``<s> A </s></s> B </s>``, passes no token
types and pads on the right.

A trace takes a prompt, a list of prompts, ids, or the tokenizer's output for a pair, under transformers'
feature-extraction pipeline (``TEXT_TASK``): there is no ``generate`` and no next token.

Native names (``roberta.embeddings.*``, ``roberta.encoder.layer[i]`` with ``attention``) are mounted on the
standard ones (``embed_tokens``, ``embed_token_types``, ``embed_positions``, ``embed_layernorm``, ``layers[i]``
with ``self_attn``); ``lm_head`` keeps its name.
"""

from __future__ import annotations

import sys

from transformers.models.camembert import modeling_camembert as hf

from ..parts.blocks.decoder import text_only
from ..parts.encoders import roberta_style as style

FAMILY = "camembert"
MODEL_TYPES = ("camembert",)
TEXT_TASK = style.TEXT_TASK
RENAME = style.rename("roberta")  # CamembertForMaskedLM keeps RoBERTa's backbone name
ENVOYS = style.envoys(hf.CamembertLayer, hf.CamembertAttention)
ROOT = style.root("CamembertStandardModel", sys.modules[__name__])

build = text_only(hf.CamembertForMaskedLM)
layer_types, prepare, dim_sizes, required_paths = style.layer_types, style.prepare, style.dim_sizes, style.required_paths
