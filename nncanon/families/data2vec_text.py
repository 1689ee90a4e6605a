"""Data2Vec-Text (Data2VecTextForMaskedLM, model_type data2vec-text): RoBERTa's architecture and tokenizer, trained
by data2vec's self-distillation instead of masked-token prediction.

data2vec trains a student on masked text to regress a teacher's (an exponential moving average of the student)
averaged top-block outputs at the masked positions; the released checkpoint is the encoder. transformers builds it
as RoBERTa under classes of its own (`nncanon.families.roberta`; what the families share is
`nncanon.parts.encoders.roberta_style`): post-norm blocks around bidirectional multi-head attention, only the right
padding masked, no final norm, positions numbered per row past the padding row (the first real token row
``pad_token_id + 1`` = 2), one token type row, and a masked-LM head ``lm_head`` (dense, GELU, ``layer_norm``, the
decoder tied to the word embeddings). facebook/data2vec-text-base's config names the backbone,
``Data2VecTextModel``, not a masked-LM class: loaded as ``Data2VecTextForMaskedLM``, a head the checkpoint does not
carry is the class's fresh one (its decoder tied to the word embeddings), so read its logits and the lens only on a
checkpoint that trained the head; every value up to ``layers[-1].layer_output`` is the backbone's.

The tokenizer is RoBERTa's byte-level BPE (``RobertaTokenizer``, the config's ``tokenizer_class``): ``<s>`` 0,
``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` last, a text framed as ``<s> A </s>``, no token types, padding on
the right. A trace takes a prompt, a list of prompts, ids, or the tokenizer's output for a pair, under
transformers' feature-extraction pipeline (``TEXT_TASK``): there is no ``generate`` and no next token.

Native names (``data2vec_text.embeddings.*``, ``data2vec_text.encoder.layer[i]`` with ``attention``) are mounted on
the standard ones (``embed_tokens``, ``embed_token_types``, ``embed_positions``, ``embed_layernorm``, ``layers[i]``
with ``self_attn``); ``lm_head`` keeps its name.
"""

from __future__ import annotations

import sys

from transformers.models.data2vec import modeling_data2vec_text as hf

from ..parts.blocks.decoder import text_only
from ..parts.encoders import roberta_style as style

FAMILY = "data2vec_text"
MODEL_TYPES = ("data2vec-text",)
TEXT_TASK = style.TEXT_TASK
RENAME = style.rename("data2vec_text")
ENVOYS = style.envoys(hf.Data2VecTextLayer, hf.Data2VecTextAttention)
ROOT = style.root("Data2VecTextStandardModel", sys.modules[__name__])

build = text_only(hf.Data2VecTextForMaskedLM)
layer_types, prepare, dim_sizes, required_paths = style.layer_types, style.prepare, style.dim_sizes, style.required_paths
