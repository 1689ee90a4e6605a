"""RoBERTa (RobertaForMaskedLM, model_type roberta): BERT's encoder, trained otherwise, numbering its positions
past a padding row and reading its MLM head from one module.

The stack is BERT's (`nncanon.families.bert`): bidirectional multi-head attention, only the right padding masked,
post-norm blocks whose ``layer_mid`` is the attention's add before ``attention.output.LayerNorm`` and whose
``layer_output`` is the LayerNorm of the MLP's add, and no final norm. What differs is data and three relations.

Positions start past the padding row (fairseq's ``make_positions``): the model numbers each row itself, a real
token's table row being ``pad_token_id`` plus its count among its row's real tokens, so the first real token reads
row ``pad_token_id + 1`` (2: ``<pad>`` is 1) and a padding token row ``pad_token_id``, the table's ``padding_idx``.
``position_embeddings`` is therefore per token ([batch, seq, hidden]), not one row shared by the batch, and the
root proves the rows from the ids and the config alone. The token type table has one row (``type_vocab_size`` 1):
RoBERTa's tokenizer returns no ``token_type_ids``, and every token adds that row. The tokenizer is a byte-level BPE
(GPT-2's), framing a text as ``<s> A </s>`` and a pair as ``<s> A </s></s> B </s>``, padding on the right with
``<pad>``.

The MLM head is one module, ``lm_head`` (``RobertaLMHead``): ``dense``, GELU and ``layer_norm`` (the transform,
whose output is ``head_transform_output``), then ``decoder``, tied to the word embeddings, with the head's own
bias. ``lm_head`` is that whole module, so ``lm_head_output`` is the decoder's output and the lens applies
``lm_head`` to the last block's output with nothing before it.

A trace takes a prompt, a list of prompts, ids, or the tokenizer's output for a pair. It loads under
transformers' feature-extraction pipeline (``TEXT_TASK``): there is no ``generate`` and no next token.

Native names (``roberta.embeddings.word_embeddings``, ``token_type_embeddings``, ``position_embeddings``,
``LayerNorm``, ``roberta.encoder.layer[i]`` with ``attention``) are mounted on the standard ones
(``embed_tokens``, ``embed_token_types``, ``embed_positions``, ``embed_layernorm``, ``layers[i]`` with
``self_attn``); ``lm_head`` keeps its name.
"""

from __future__ import annotations

import sys

from transformers.models.roberta import modeling_roberta as hf

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

FAMILY = "roberta"
MODEL_TYPES = ("roberta",)
#: the pipeline of a text load: an encoder has no text-generation
TEXT_TASK = "feature-extraction"
RENAME = encoder_rename("roberta")

ENVOYS = {hf.RobertaLayer: PostNormBlock, hf.RobertaAttention: EncoderAttention}

ROOT = encoder_root("RobertaStandardModel", sys.modules[__name__], *past_the_padding_row_root(ROBERTA_HEAD))

build = text_only(hf.RobertaForMaskedLM)
layer_types = attention_layer_types  # RobertaConfig has no layer_types: full (bidirectional) attention on every block
prepare = nothing_to_prepare
dim_sizes = intermediate_dims
required_paths = roberta_paths
