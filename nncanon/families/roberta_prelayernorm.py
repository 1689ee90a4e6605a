"""RoBERTa-PreLayerNorm (RobertaPreLayerNormForMaskedLM, model_type roberta-prelayernorm): RoBERTa trained with
fairseq's ``--encoder-normalize-before``, a LayerNorm before each sublayer instead of after each add.

The blocks are XLM-R XL's pre-norm blocks (`nncanon.parts.encoders.pre_norm`) with the norms elsewhere: the
attention wrapper's ``LayerNorm`` before the query, key and value projections, and ``intermediate.LayerNorm``, inside
the MLP's up projection module, before ``intermediate.dense``. The output sublayers add the residual themselves, so
the stream between blocks is the plain sum, normed once past the last block by the backbone's ``LayerNorm``
(mounted as ``norm``, ``final_norm_output``), which the MLM head reads. Unlike XLM-R XL's, the embeddings keep
RoBERTa's LayerNorm (``embedding_norm_output``).

The rest is RoBERTa's (the shared declarations are `nncanon.parts.encoders.roberta_style`): bidirectional
multi-head attention with only the right padding masked, positions numbered per row past the padding row (the
first real token row ``pad_token_id + 1`` = 2), one token type row, the MLM head ``lm_head`` (dense, GELU,
``layer_norm``, the decoder tied to the word embeddings), and RoBERTa's byte-level BPE tokenizer. A trace takes a
prompt, a list of prompts, ids, or the tokenizer's output for a pair, under transformers' feature-extraction
pipeline (``TEXT_TASK``).

Native names (``roberta_prelayernorm.embeddings.*``, ``roberta_prelayernorm.encoder.layer[i]`` with ``attention``,
``roberta_prelayernorm.LayerNorm``) are mounted on the standard ones (``embed_tokens``, ``embed_token_types``,
``embed_positions``, ``embed_layernorm``, ``layers[i]`` with ``self_attn``, ``norm``); ``lm_head`` keeps its name.
"""

from __future__ import annotations

import sys

from transformers.models.roberta_prelayernorm import modeling_roberta_prelayernorm as hf

from ..parts.blocks.decoder import text_only
from ..parts.encoders import roberta_style as style
from ..parts.encoders.pre_norm import pre_norm_block

FAMILY = "roberta_prelayernorm"
MODEL_TYPES = ("roberta-prelayernorm",)
TEXT_TASK = style.TEXT_TASK
RENAME = style.pre_norm_rename("roberta_prelayernorm", "roberta_prelayernorm.LayerNorm")
#: the attention's norm is its wrapper's LayerNorm, the MLP's the first module of intermediate
ENVOYS = style.pre_norm_envoys(hf.RobertaPreLayerNormLayer, hf.RobertaPreLayerNormAttention,
                               pre_norm_block("RobertaPreLayerNormBlock", "LayerNorm", "intermediate.LayerNorm"))
ROOT = style.root("RobertaPreLayerNormStandardModel", sys.modules[__name__], final_norm=True)

build = text_only(hf.RobertaPreLayerNormForMaskedLM)
layer_types, prepare, dim_sizes = style.layer_types, style.prepare, style.dim_sizes
required_paths = style.pre_norm_paths("LayerNorm", "intermediate.LayerNorm")
