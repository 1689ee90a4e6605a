"""MiniCPM3 (MiniCPM3ForCausalLM, model_type minicpm3): OpenBMB's MiniCPM3, latent attention in a scaled pre-norm block.

Every block is RMSNorm -> attention -> add, RMSNorm -> SwiGLU MLP -> add, Llama's order. The attention is DeepSeek-V2's
multi-head latent attention (`nncanon.parts.attention.latent`): queries through a normed query latent, keys and
values rebuilt per head by ``kv_b_proj`` from one normed key/value latent, beside a rotary key part shared by every
head; MiniCPM3 turns the rope part with (cos, sin) on its two halves, not DeepSeek's interleaved pairs. Three scalars
of the config act in the forward, none of them a module (`nncanon.parts.blocks.scaled`):

- ``scale_emb``: the embedding module multiplies its rows by it, so ``token_embeddings`` (embed_tokens' output) is
  already scaled: ``token_embeddings == embed_tokens.weight[input_ids] · scale_emb == layers[0].layer_input``.
- ``scale_depth``: each block adds ``scale_depth / √num_hidden_layers`` times each branch (its ``residual_scale``):
  ``layer_mid == layer_input + residual_scale · attention_output``, and so for the MLP.
- ``dim_model_base``: the normed stream is divided by ``logits_scaling = hidden_size / dim_model_base`` before
  lm_head reads it: ``lm_head_output == lm_head(final_norm_output / logits_scaling)``, and ``logits`` is
  ``lm_head_output``. The lens divides the same way (``before_the_head``).
"""

from __future__ import annotations

import sys

from transformers.models.minicpm3 import modeling_minicpm3 as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import own
from ..core.model import StandardModel
from ..core.values import Value
from ..parts.attention.latent import LatentAttention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.scaled import (
    BLOCK_KEPT,
    divided_before_the_head,
    embedding_scaled_inside,
    head_of_scaled_stream,
    scaled_adds,
)
from . import deepseek_v3 as v3

_REPLACED = ("layers[0].layer_input == token_embeddings", "lm_head_output == lm_head(final_norm_output)")
ROOT_RELATIONS_MINICPM3 = (embedding_scaled_inside, head_of_scaled_stream,
                           *(r for r in ROOT_RELATIONS if r.text not in _REPLACED))

ScaledBlock = host("ScaledBlock", Block, RELATIONS=(
    *scaled_adds("residual_scale", lambda block: block.residual_scale), *BLOCK_KEPT))

ScaledLatentAttention = host("ScaledLatentAttention", LatentAttention, values=[
    Value("attention_output", Residual, "The attention's output (o_proj's); the block adds residual_scale "
          "(scale_depth / √num_hidden_layers) times it to the residual stream", own("output", element=0)),
])

ScaledMLP = host("ScaledMLP", MLP, values=[
    Value("mlp_output", Residual, "The MLP's output (down_proj's); the block adds residual_scale "
          "(scale_depth / √num_hidden_layers) times it to the residual stream", own("output")),
])

FAMILY = "minicpm3"
MODEL_TYPES = ("minicpm3",)
RENAME = TEXT_RENAME
ENVOYS = {hf.MiniCPM3DecoderLayer: ScaledBlock, hf.MiniCPM3Attention: ScaledLatentAttention, hf.MiniCPM3MLP: ScaledMLP}
ROOT = host("MiniCPM3StandardModel", StandardModel, values=[
    *ROOT_VALUES,
    Value("token_embeddings", Residual, "The embedding module's output, its rows already multiplied by scale_emb",
          ROOT_VALUES[1].locator),
    Value("final_norm_output", Residual, "The residual stream after the final norm; lm_head reads it divided by "
          "logits_scaling", ROOT_VALUES[2].locator),
], RELATIONS=ROOT_RELATIONS_MINICPM3, family_module=sys.modules[__name__])

build = text_only(hf.MiniCPM3ForCausalLM)
layer_types = attention_layer_types
prepare = nothing_to_prepare
before_the_head = divided_before_the_head
qk_head_dim = v3.qk_head_dim
head_dim = v3.head_dim


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {"num_kv_heads": config.num_attention_heads, "q_lora_rank": config.q_lora_rank or 0,
            "kv_lora_rank": config.kv_lora_rank, "qk_nope_head_dim": config.qk_nope_head_dim,
            "qk_rope_head_dim": config.qk_rope_head_dim, "intermediate_size": config.intermediate_size}


def required_paths(model: StandardModel) -> list[str]:
    return [*TEXT_PATHS, "layers.0.self_attn.kv_a_layernorm", "layers.0.self_attn.kv_b_proj"]
