"""BioGPT (BioGptForCausalLM, model_type biogpt): learned positions offset by two rows, a scaled token embedding, and
an MLP with no module of its own.

The stream entering the first block is the token embedding, scaled, plus a learned position embedding
(``biogpt.embed_positions``, mounted as ``embed_positions``): the embedding module multiplies its rows by
``embed_scale`` (√hidden_size under ``scale_embedding``, BioGPT's setting), so ``token_embeddings`` is the scaled
row, and the position table starts two rows in, as OPT's (position p reads row p + 2; BioGPT numbers each row's real
tokens from 0, ``cumsum(attention_mask) - 1``, so a left-padded row's first real token is at position 0).

The block is pre-norm, as OPT's: ``self_attn_layer_norm`` (mounted as ``input_layernorm``) -> attention -> add,
``final_layer_norm`` (``post_attention_layernorm``) -> fc1 -> GELU -> fc2 -> add. There is no MLP module: ``fc1``,
``activation_fn`` and ``fc2`` are the block's own children, so the MLP's values are the block's
(``layers[i].mlp_output``); unlike OPT's, the block runs them on ``[batch, seq, ...]``. The attention is multi-head
with separate ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` (mounted as ``o_proj``), all with biases, through
the shared attention function scaled by head_dim^-0.5. The final norm is ``biogpt.layer_norm`` (``norm``), and the
head (``output_projection``, mounted as ``lm_head``) is tied to the token embedding.
"""

from __future__ import annotations

import sys

from transformers.models.biogpt import modeling_biogpt as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.values import IDENTITY
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import Block, attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.positions import root_relations, root_values
from .opt import BLOCK_MLP_RELATIONS, block_mlp_values, projections

FAMILY = "biogpt"
MODEL_TYPES = ("biogpt",)
RENAME = {
    "biogpt.embed_tokens": "embed_tokens",
    "biogpt.embed_positions": "embed_positions",
    "biogpt.layers": "layers",
    "biogpt.layer_norm": "norm",
    "output_projection": "lm_head",
    "self_attn_layer_norm": "input_layernorm",
    "final_layer_norm": "post_attention_layernorm",
    "out_proj": "o_proj",
}

BioGptBlock = host("BioGptBlock", Block, values=block_mlp_values(view=IDENTITY), RELATIONS=BLOCK_MLP_RELATIONS)
BioGptAttention = host("BioGptAttention", Attention, RELATIONS=(*ATTENTION_RELATIONS, projections(scaled=False)))

ENVOYS = {hf.BioGptDecoderLayer: BioGptBlock, hf.BioGptAttention: BioGptAttention}
# BioGptConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("BioGptStandardModel", StandardModel, values=root_values("biogpt.embed_positions"),
            RELATIONS=root_relations(offset=2, scaled=True), family_module=sys.modules[__name__])

build = text_only(hf.BioGptForCausalLM)
layer_types = attention_layer_types  # BioGptConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "embed_positions", "layers", "norm", "lm_head", "layers.0.input_layernorm",
            "layers.0.self_attn", "layers.0.self_attn.q_proj", "layers.0.self_attn.o_proj",
            "layers.0.post_attention_layernorm", "layers.0.fc1", "layers.0.activation_fn", "layers.0.fc2"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
