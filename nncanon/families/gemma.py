"""Gemma (GemmaForCausalLM, model_type gemma): Llama's pre-norm block with Gemma's norms, GeGLU and a scaled
embedding.

The block is Llama's in order: RMSNorm -> attention -> add, RMSNorm -> gated MLP -> add, with no norm after a
sublayer, no softcap and no sliding window (those came with Gemma 2). What is Gemma's: every RMSNorm
multiplies by ``(1 + weight)``, not ``weight`` (so a zero weight is the identity gain); the MLP's gate is a
GELU (tanh approximation: the released configs say ``hidden_act: gelu``, which GemmaConfig rewrites to
``gelu_pytorch_tanh``), so the MLP is a GeGLU; the embedding module scales its rows by ``sqrt(hidden_size)``
inside embed_tokens, so ``token_embeddings`` is already scaled; and lm_head is tied to embed_tokens. gemma-2b
attends with one key/value head shared by all eight query heads (multi-query), gemma-7b with sixteen of
each; a head is 256 wide on both, which on 7B is not hidden_size / heads. The norm and the embedding
relations are Gemma 2's (nncanon.families.gemma2); the MLP norm reads post_attention_layernorm, as Llama's.
"""

from __future__ import annotations

import sys

from transformers.models.gemma import modeling_gemma as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import pick, relation
from ..parts.attention.softmax import Attention
from ..parts.blocks import decoder
from ..parts.blocks.mlp import MLP
from ..parts.blocks.text_family import intermediate_dims, root_relations, text_paths
from .gemma2 import _final_norm, _scaled_embeddings, gemma_rms

FAMILY = "gemma"
MODEL_TYPES = ("gemma",)
RENAME = decoder.TEXT_RENAME


@relation("attention_norm_output == input_layernorm(layer_input) == rms(layer_input) · (1 + input_layernorm.weight) "
          "== what self_attn is called with", proves="attention_norm_output",
          reads="layer_input attention_norm_output self_attn.input")
def _attention_norm(host, r):
    return [(gemma_rms(host.input_layernorm._module, r["layer_input"]), r["attention_norm_output"]),
            (r["self_attn.input"], r["attention_norm_output"])]


@relation("mlp_input == mlp_norm_output == rms(layer_mid) · (1 + post_attention_layernorm.weight)",
          proves="mlp_norm_output mlp_input", reads="layer_mid mlp_norm_output mlp_input")
def _mlp_norm(host, r):
    return [(gemma_rms(host.post_attention_layernorm._module, r["layer_mid"]), r["mlp_norm_output"]),
            (r["mlp_norm_output"], r["mlp_input"])]


#: Llama's block and its two adds, its norms Gemma's
GemmaNormBlock = host("GemmaNormBlock", decoder.Block, RELATIONS=(
    pick(decoder.BLOCK_RELATIONS, "layer_input + {mixer}"), pick(decoder.BLOCK_RELATIONS, "layer_mid + mlp"), _attention_norm, _mlp_norm))

#: Llama's root with Gemma's scaled embedding and (1 + weight) final norm; nothing past the head
_GEMMA_ROOT = {"layers[0].layer_input == token_embeddings": _scaled_embeddings,
               "final_norm_output": _final_norm}
ROOT_RELATIONS_GEMMA = root_relations(_GEMMA_ROOT)

ENVOYS = {hf.GemmaDecoderLayer: GemmaNormBlock, hf.GemmaAttention: Attention, hf.GemmaMLP: MLP}
ROOT = host("GemmaStandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=ROOT_RELATIONS_GEMMA,
            family_module=sys.modules[__name__])

build = decoder.text_only(hf.GemmaForCausalLM)
layer_types = decoder.attention_layer_types  # GemmaConfig has no layer_types: full attention on every block
prepare = decoder.nothing_to_prepare

required_paths = text_paths
dim_sizes = intermediate_dims
