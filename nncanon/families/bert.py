"""BERT (BertForMaskedLM, model_type bert): a bidirectional encoder with post-norm blocks and a masked-LM head.

Nothing is causal: every token attends to every real token of its row, before and after it, and only padding
(on the right: the tokenizer pads there) is masked, for queries and keys alike. The stream entering the first
block is the LayerNorm of three embeddings summed: the word's, the token type's (0 for the first text of a
pair, 1 for the second) and a learned absolute position's (``0 .. seq-1`` from the first column); each table is
a root value, and ``embedding_output`` is their normed sum.

Each block is post-norm: ``layer_mid = layer_input + attention_output`` is normed (``attention.output.LayerNorm``)
into ``mlp_norm_output``, which the MLP reads and its output is added to, and that sum is normed
(``output.LayerNorm``) into ``layer_output``; no norm precedes the attention. The attention is multi-head with
separate ``query``, ``key``, ``value`` projections (all with biases) in ``attention.self``, and ``attention.output
.dense`` projecting the heads back; ``self_attn`` is ``attention``, the module holding both, so
``attention_output`` is the projection's output, what is added before the norm. The MLP is ``intermediate``
(dense and GELU) then ``output.dense``; it has no module of its own, so its values are the block's
(``layers[i].mlp_output``). There is no final norm: the MLM head's transform (dense, GELU, LayerNorm;
``head_transform``) reads the last block's output, and its decoder (``lm_head``) is tied to the word embeddings
with a bias of its own. The lens applies the transform (``before_the_head``).

A trace takes what BERT takes: a prompt, a list of prompts, ids, or the tokenizer's output for a text pair
(``input_ids``, ``token_type_ids``, ``attention_mask``). It loads under transformers' feature-extraction
pipeline (``TEXT_TASK``), whose preprocessing only tokenizes: fill-mask's refuses a prompt without exactly one
``[MASK]``. There is no ``generate`` and no next token: ``next_token_probs`` is not served.

Native names (``bert.embeddings.word_embeddings``, ``token_type_embeddings``, ``position_embeddings``,
``LayerNorm``, ``bert.encoder.layer[i]`` with ``attention``, ``cls.predictions.transform``, ``decoder``) are
mounted on the standard ones (``embed_tokens``, ``embed_token_types``, ``embed_positions``, ``embed_layernorm``,
``layers[i]`` with ``self_attn``, ``head_transform``, ``lm_head``).
"""

from __future__ import annotations

import sys

from transformers.models.bert import modeling_bert as hf

from ..core.model import StandardModel
from ..parts.blocks.decoder import attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.text_family import intermediate_dims
from ..parts.encoders.bidirectional import EncoderAttention
from ..parts.encoders.embeddings import before_the_head as transform_then_decoder
from ..parts.encoders.embeddings import encoder_rename, encoder_root
from ..parts.encoders.post_norm import PostNormBlock

FAMILY = "bert"
MODEL_TYPES = ("bert",)
#: the pipeline of a text load: an encoder has no text-generation
TEXT_TASK = "feature-extraction"
RENAME = {**encoder_rename("bert"), "cls.predictions.transform": "head_transform",
          "cls.predictions.decoder": "lm_head"}

ENVOYS = {hf.BertLayer: PostNormBlock, hf.BertAttention: EncoderAttention}


ROOT = encoder_root("BertStandardModel", sys.modules[__name__])

build = text_only(hf.BertForMaskedLM)
layer_types = attention_layer_types  # BertConfig has no layer_types: full (bidirectional) attention on every block
prepare = nothing_to_prepare
dim_sizes = intermediate_dims
before_the_head = transform_then_decoder  # the lens applies the MLM head's transform before the decoder


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "embed_token_types", "embed_positions", "embed_layernorm", "layers", "head_transform",
            "lm_head", "layers.0.self_attn", "layers.0.self_attn.self", "layers.0.self_attn.E_output.dense",
            "layers.0.intermediate", "layers.0.E_output.dense", "layers.0.E_output.LayerNorm"]
