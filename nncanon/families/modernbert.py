"""ModernBERT (ModernBertForMaskedLM, model_type modernbert): a bidirectional encoder with pre-norm blocks, a rotary,
local and global attention, a GeGLU MLP and no biases.

Nothing is causal: a query reads the real keys before and after it. The blocks are of two kinds (``layer_types``;
configs older than the field give ``global_attn_every_n_layers``: every third block global, the first one included).
A global block (``full_attention``) reads every real key of the row; a local one (``sliding_attention``) only the
keys within ``local_attention // 2`` positions of the query, on either side (the module's ``sliding_window`` is one
more: a key is read when ``|k - q| < sliding_window``). Each kind rotates its queries and keys with a rope base of
its own (``rope_parameters[layer_type]["rope_theta"]``: the global blocks' and the local blocks' differ). Only padding
is masked beyond the window, on the right (the tokenizer pads there), for queries and keys alike. The unpadding path
of the original implementation is gone from transformers 5: the model loads under eager or sdpa attention, as
BERT's does, over the padded batch.

The stream entering the first block is the LayerNorm of the word embeddings (no positions are added: the rotary
places the tokens). Each block is pre-norm: ``attn_norm`` (the identity on the first block, whose input the
embeddings' norm has just normed) before the attention, ``mlp_norm`` before the MLP, each output added to the stream.
The attention's ``Wqkv`` computes queries, keys and values in one matmul (thirds, in that order); ``Wo`` projects the
heads back. The MLP's ``Wi`` computes both halves of a GeGLU in one matmul: the first half through the GELU, times
the second, into ``Wo``. No Linear and no LayerNorm has a bias (``attention_bias``, ``mlp_bias``, ``norm_bias`` false)
except the decoder's. A final LayerNorm closes the stack; the masked-LM head's transform (dense, GELU, LayerNorm:
``head_transform``) reads it, and the decoder (``lm_head``) is tied to the word embeddings with a bias of its own.
The lens applies the transform (``before_the_head``).

A trace takes a prompt, a list of prompts, ids, or the tokenizer's output (``[CLS] A [SEP]``; no token types). It
loads under transformers' feature-extraction pipeline (``TEXT_TASK``): there is no ``generate`` and no next token.

Native names (``model.embeddings.tok_embeddings``, ``model.embeddings.norm``, ``model.layers[i]`` with ``attn_norm``,
``attn`` and its ``Wo``, ``mlp_norm``, ``mlp`` with ``Wi``, ``act``, ``Wo``; ``model.final_norm``, ``head``,
``decoder``) are mounted on the standard ones (``embed_tokens``, ``embed_layernorm``, ``layers[i]`` with
``input_layernorm``, ``self_attn`` and its ``o_proj``, ``post_attention_layernorm``, ``mlp`` with ``gate_up_proj``,
``activation_fn``, ``down_proj``; ``norm``, ``head_transform``, ``lm_head``).
"""

from __future__ import annotations

import sys

from transformers.models.modernbert import modeling_modernbert as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.mlp import FusedGatedMLP
from ..parts.blocks.text_family import intermediate_dims
from ..parts.encoders.embeddings import RIGHT_PADDING_RELATION, every_head
from ..parts.encoders.local_global import (
    ROOT_VALUES,
    FirstNormlessBlock,
    LocalGlobalAttention,
    root_relations,
)
from ..parts.encoders.local_global import before_the_head as before_the_head
from ..research.weights import stacked_qkv

FAMILY = "modernbert"
MODEL_TYPES = ("modernbert",)
#: the pipeline of a text load: an encoder has no text-generation
TEXT_TASK = "feature-extraction"
#: the native names of both ModernBERT families' trees (the causal one's head keeps its own: modernbert_decoder)
MODERN_RENAME = {"model.embeddings.tok_embeddings": "embed_tokens", "model.embeddings.norm": "embed_layernorm",
                 "model.layers": "layers", "model.final_norm": "norm", "attn_norm": "input_layernorm",
                 "mlp_norm": "post_attention_layernorm", "attn.Wo": "attn.o_proj", "attn": "self_attn",
                 "mlp.Wi": "mlp.gate_up_proj", "mlp.act": "mlp.activation_fn", "mlp.Wo": "mlp.down_proj"}
RENAME = {**MODERN_RENAME, "head": "head_transform", "decoder": "lm_head"}

ModernBertAttention = host("ModernBertAttention", LocalGlobalAttention, WEIGHTS=stacked_qkv("Wqkv"))

ENVOYS = {hf.ModernBertEncoderLayer: FirstNormlessBlock, hf.ModernBertAttention: ModernBertAttention,
          hf.ModernBertMLP: FusedGatedMLP}

ROOT = host("ModernBertStandardModel", StandardModel, values=ROOT_VALUES,
            RELATIONS=root_relations(RIGHT_PADDING_RELATION), family_module=sys.modules[__name__],
            num_kv_heads=property(every_head, doc=every_head.__doc__))

build = text_only(hf.ModernBertForMaskedLM)
layer_types = attention_layer_types  # config.layer_types: sliding_attention (local) and full_attention (global)
prepare = nothing_to_prepare
dim_sizes = intermediate_dims

#: the modules both ModernBERT families have: the embeddings and their norm, the stack, a block's parts
MODERN_PATHS = ["embed_tokens", "embed_layernorm", "layers", "norm", "layers.0.input_layernorm", "layers.0.self_attn",
                "layers.0.self_attn.o_proj", "layers.0.post_attention_layernorm", "layers.0.mlp",
                "layers.0.mlp.gate_up_proj", "layers.0.mlp.activation_fn", "layers.0.mlp.down_proj"]


def required_paths(model: StandardModel) -> list[str]:
    return [*MODERN_PATHS, "head_transform", "lm_head"]
