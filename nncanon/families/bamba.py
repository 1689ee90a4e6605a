"""Bamba (BambaForCausalLM, model_type bamba): a stack of Mamba-2 blocks with attention at a few of them.

Every block is Llama's shape, pre-norm mixer then pre-norm SwiGLU MLP (native ``feed_forward`` through
``pre_ff_layernorm``), but its sequence mixer is one of two kinds, ``config.layers_block_type``: a Mamba-2
mixer ``mamba`` (``linear_attention``) on most blocks, grouped-query attention ``self_attn``
(``full_attention``, at ``attn_layer_indices``) on the rest, with rotary on half of each head
(``partial_rotary_factor`` 0.5, fixed by the config). The mixer is transformers' Mamba2Mixer with its config
fields renamed (``mamba_n_heads``, ``mamba_d_head``, ...) and its cache the hybrid one (KV for attention
blocks, conv and recurrent state for Mamba-2 blocks); `nncanon.parts.recurrent.ssd` serves it under the mamba2 family's
names and layouts: ``State [batch heads key_dim value_dim]`` with ``key_dim = mamba_d_state`` and
``value_dim = mamba_d_head``, ``state`` and ``states`` under ``nncanon.route_kernels(model.family, "torch")``.
"""

from __future__ import annotations

import sys

from transformers.models.bamba import modeling_bamba as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block, text_only
from ..parts.blocks.mlp import MLP
from ..parts.recurrent import hybrid, ssd
from ..parts.recurrent.ssd import KERNELS, SSD  # noqa: F401 (the family API, shared)

FAMILY = "bamba"
MODEL_TYPES = ("bamba",)
RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.final_layernorm": "norm",
          "feed_forward": "mlp", "pre_ff_layernorm": "post_attention_layernorm"}
KERNEL_LIBRARY = "mamba_ssm"
#: block kind -> the block's sequence mixer
MIXERS = {"linear_attention": "mamba", "full_attention": "self_attn"}

HybridBlock = host("HybridBlock", Block, MIXERS=tuple(MIXERS.values()))
BambaSSD = host("BambaSSD", SSD, HOST="model.layers[i].mamba")

ENVOYS = {hf.BambaDecoderLayer: HybridBlock, hf.BambaAttention: Attention, hf.BambaMixer: BambaSSD, hf.BambaMLP: MLP}
ROOT = host("BambaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.BambaForCausalLM)


def layer_types(model) -> list[str]:
    return list(model.text_config.layers_block_type)


explain_missing = hybrid.explain_missing(MIXERS, layer_types)


def prepare(model: StandardModel) -> None:
    ssd.prepare(model, hf)


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.post_attention_layernorm",
            "layers.0.mlp"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    inner = int(config.mamba_expand * config.hidden_size)
    return {"key_heads": config.mamba_n_groups, "heads": config.mamba_n_heads, "key_dim": config.mamba_d_state,
            "value_dim": config.mamba_d_head, "intermediate_size": config.intermediate_size,
            "conv_dim": inner + 2 * config.mamba_n_groups * config.mamba_d_state, "conv_kernel": config.mamba_d_conv}
