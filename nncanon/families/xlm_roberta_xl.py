"""XLM-RoBERTa-XL (XLMRobertaXLForMaskedLM, model_type xlm-roberta-xl): XLM-R scaled to 3.5B (XL) and 10.7B (XXL)
parameters, its blocks made pre-norm to train at that depth.

Each block norms its input before each sublayer and nothing after (`nncanon.parts.encoders.pre_norm`): the attention
wrapper's ``self_attn_layer_norm`` before the query, key and value projections, the block's ``LayerNorm`` before
``intermediate``; the two output sublayers add the residual themselves, so the attention wrapper's output is
``layer_mid`` and the block's is ``layer_output``. The stream between blocks is the plain sum, normed once past the
last block by the encoder's ``LayerNorm`` (mounted as ``norm``, ``final_norm_output``), which the MLM head reads.
There is no LayerNorm on the embeddings: the sum of the word, token type and position embeddings enters the first
block (``embedding_norm_output`` does not exist).

The rest is XLM-R's (`nncanon.families.xlm_roberta`; the shared declarations are
`nncanon.parts.encoders.roberta_style`): bidirectional multi-head attention with only the right padding masked,
positions numbered per row past the padding row (the first real token row ``pad_token_id + 1`` = 2), one token type
row, the MLM head ``lm_head`` (dense, GELU, ``layer_norm``, the decoder tied to the word embeddings), and the
SentencePiece unigram tokenizer of XLM-R (``XLMRobertaTokenizer``), whose vocabulary the checkpoints pad to 250,880
rows. A trace takes a prompt, a list of prompts, ids, or the tokenizer's output for a pair, under transformers'
feature-extraction pipeline (``TEXT_TASK``).

Native names (``roberta.embeddings.*``, ``roberta.encoder.layer[i]`` with ``attention``, ``roberta.encoder.LayerNorm``)
are mounted on the standard ones (``embed_tokens``, ``embed_token_types``, ``embed_positions``, ``layers[i]`` with
``self_attn``, ``norm``); ``lm_head`` keeps its name.
"""

from __future__ import annotations

import sys

from transformers.models.xlm_roberta_xl import modeling_xlm_roberta_xl as hf

from ..parts.blocks.decoder import text_only
from ..parts.encoders import roberta_style as style
from ..parts.encoders.pre_norm import pre_norm_block

FAMILY = "xlm_roberta_xl"
MODEL_TYPES = ("xlm-roberta-xl",)
TEXT_TASK = style.TEXT_TASK
RENAME = style.pre_norm_rename("roberta", "roberta.encoder.LayerNorm", embedding_norm=False)
#: the attention's norm is its wrapper's self_attn_layer_norm, the MLP's the block's own LayerNorm
ENVOYS = style.pre_norm_envoys(hf.XLMRobertaXLLayer, hf.XLMRobertaXLAttention,
                               pre_norm_block("XLMRobertaXLBlock", "self_attn_layer_norm", "LayerNorm"))
ROOT = style.root("XLMRobertaXLStandardModel", sys.modules[__name__], final_norm=True, embedding_norm=False)

build = text_only(hf.XLMRobertaXLForMaskedLM)
layer_types, prepare, dim_sizes = style.layer_types, style.prepare, style.dim_sizes
required_paths = style.pre_norm_paths("self_attn_layer_norm", "LayerNorm", embedding_norm=False)
