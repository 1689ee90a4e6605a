"""ModernBERT decoder (ModernBertDecoderForCausalLM, model_type modernbert-decoder): ModernBERT's stack made causal,
the Ettin decoders'.

Everything but the mask is ModernBERT's (`nncanon.families.modernbert`, over `nncanon.parts.encoders.local_global`):
the word embeddings' LayerNorm and no positions added, pre-norm blocks with no norm before the first block's
attention, LayerNorms and Linears without biases, a GeGLU MLP whose two halves come from one ``Wi``, local and global
blocks each rotating with its own rope base, a final norm, the prediction head's transform (dense, GELU, LayerNorm)
and a decoder tied to the word embeddings with a bias of its own. What differs: every query reads only the keys before
it and itself, a local block only the last ``local_attention // 2`` of them (the module's ``sliding_window``: a key
is read when ``q - sliding_window < k <= q``), and the attention projects queries, keys and values with three
Linears (``q_proj``, ``k_proj``, ``v_proj``) where the encoder has one ``Wqkv``. There is a ``generate`` and a next
token; padding is on the left.

The native names clash once: the causal LM's ``lm_head`` is the prediction head's transform and its ``decoder`` the
Linear that makes the logits. The standard ``lm_head`` is the Linear (``W_U`` is its weight, the lens ends in it), so
this family's root serves ``lm_head`` as the native ``decoder`` and mounts the native ``lm_head`` as
``head_transform``; ``model._module.lm_head`` is still the transform.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.modernbert_decoder import modeling_modernbert_decoder as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import pick
from ..parts.blocks.decoder import ROOT_RELATIONS, attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.decoder import ROOT_VALUES as DECODER_ROOT_VALUES
from ..parts.blocks.mlp import FusedGatedMLP
from ..parts.blocks.text_family import intermediate_dims
from ..parts.encoders.embeddings import every_head
from ..parts.encoders.local_global import (
    ROOT_VALUES,
    CausalLocalGlobalAttention,
    FirstNormlessBlock,
    root_relations,
)
from ..parts.encoders.local_global import before_the_head as before_the_head
from .modernbert import MODERN_PATHS, MODERN_RENAME

FAMILY = "modernbert_decoder"
MODEL_TYPES = ("modernbert-decoder",)
#: the native lm_head (the prediction head's transform) by its class: the name lm_head is the decoder's here
RENAME = {**MODERN_RENAME, hf.ModernBertDecoderPredictionHead: "head_transform"}

ENVOYS = {hf.ModernBertDecoderLayer: FirstNormlessBlock, hf.ModernBertDecoderAttention: CausalLocalGlobalAttention,
          hf.ModernBertDecoderMLP: FusedGatedMLP}


def _the_decoder(model: Any) -> Any:
    """The standard lm_head: the Linear making the logits, native ``decoder``."""
    return model.decoder


def _native_head(model: Any, envoy: Any) -> None:
    """nnsight mounts the native ``lm_head`` child under its own name; it is served as head_transform instead."""
    model.__dict__["_native_lm_head"] = envoy


_MASK = pick(ROOT_RELATIONS, "attention_mask ==")  # left padding
_PROBS = pick(ROOT_RELATIONS, "next_token_probs ==")

ROOT = host("ModernBertDecoderStandardModel", StandardModel,
            values=[*ROOT_VALUES, *(v for v in DECODER_ROOT_VALUES if v.name == "next_token_probs")],
            RELATIONS=(*root_relations(_MASK), _PROBS), family_module=sys.modules[__name__],
            num_kv_heads=property(every_head, doc=every_head.__doc__),
            lm_head=property(_the_decoder, _native_head, doc=_the_decoder.__doc__))

build = text_only(hf.ModernBertDecoderForCausalLM)
layer_types = attention_layer_types  # config.layer_types: sliding_attention (local) and full_attention (global)
prepare = nothing_to_prepare
dim_sizes = intermediate_dims


def required_paths(model: StandardModel) -> list[str]:
    return [*MODERN_PATHS, "head_transform", "lm_head"]
