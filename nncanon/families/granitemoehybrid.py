"""Granite 4.0-H (GraniteMoeHybridForCausalLM, model_type granitemoehybrid): Mamba-2 and attention blocks,
each with a mixture of experts beside a shared expert, and Granite's four µP multipliers.

Every block norms its input (``input_layernorm``) and runs one sequence mixer of two kinds,
``config.layer_types``: a Mamba-2 mixer ``mamba`` (``linear_attention``) on most blocks, grouped-query
attention ``self_attn`` (``full_attention``; no position encoding on the released checkpoints,
``position_embedding_type`` ``nope``) on a few. It adds ``residual_multiplier`` times the mixer's output
(``layer_mid``), norms that (``post_attention_layernorm``) and hands it to two MLPs side by side: the routed
mixture, native ``block_sparse_moe`` (served as ``mlp``: a softmax over the top-k router logits, fused
SwiGLU experts), and the shared expert, native ``shared_mlp`` (served as ``shared_experts``: a SwiGLU MLP whose
gate and up projections are one fused ``input_linear``, chunked in two); it adds ``residual_multiplier``
times their sum. As on granite, ``embedding_multiplier`` scales the embedding before the first block,
``attention_multiplier`` is the attention's softmax scale, and the logits are lm_head's divided by
``logits_scaling``. The Mamba-2 mixer is transformers' Mamba2Mixer with its config fields renamed;
`nncanon.parts.recurrent.ssd` serves it under the mamba2 family's names and layouts (``key_dim = mamba_d_state``,
``value_dim = mamba_d_head``). A config with no experts (``num_local_experts`` 0, the dense 4.0-H micro
sizes) is refused: this family covers the mixture checkpoints.
"""

from __future__ import annotations

import sys

from transformers.models.granitemoehybrid import modeling_granitemoehybrid as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import own
from ..core.model import FamilyMismatch, StandardModel
from ..core.values import Value
from ..parts.blocks.decoder import text_only
from ..parts.blocks.granite_shared import GraniteMoE, GraniteSharedExpertBlock, SharedExpert
from ..parts.recurrent import hybrid, ssd
from ..parts.recurrent.ssd import KERNELS, SSD  # noqa: F401 (the family API, shared)
from .granite import ROOT as GRANITE_ROOT
from .granite import GraniteAttention

FAMILY = "granitemoehybrid"
MODEL_TYPES = ("granitemoehybrid",)
RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.norm": "norm",
          "block_sparse_moe": "mlp", "shared_mlp": "shared_experts"}
KERNEL_LIBRARY = "mamba_ssm"
#: block kind -> the block's sequence mixer
MIXERS = {"linear_attention": "mamba", "full_attention": "self_attn"}

#: the block: residual_multiplier on both branches, the MLP branch the mixture plus the shared expert
GraniteHybridBlock = host("GraniteHybridBlock", GraniteSharedExpertBlock, MIXERS=tuple(MIXERS.values()))

GraniteSSD = host("GraniteSSD", SSD, values=[
    Value("attention_output", Residual,
          "The mixer's output (out_proj's); the block adds residual_multiplier times it to the residual stream",
          own("output")),
], HOST="model.layers[i].mamba")

ENVOYS = {hf.GraniteMoeHybridDecoderLayer: GraniteHybridBlock, hf.GraniteMoeHybridAttention: GraniteAttention,
          hf.GraniteMoeHybridMambaLayer: GraniteSSD, hf.GraniteMoeHybridMoE: GraniteMoE,
          hf.GraniteMoeHybridMLP: SharedExpert}
ROOT = host("GraniteMoeHybridStandardModel", GRANITE_ROOT, family_module=sys.modules[__name__])

build = text_only(hf.GraniteMoeHybridForCausalLM)


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): the model divides lm_head's output by logits_scaling."""
    return logits / model._module.config.logits_scaling


def layer_types(model) -> list[str]:
    return list(model.text_config.layer_types)


explain_missing = hybrid.explain_missing(MIXERS, layer_types)


def prepare(model: StandardModel) -> None:
    ssd.prepare(model, hf)


def required_paths(model: StandardModel) -> list[str]:
    if not model.text_config.num_local_experts:
        raise FamilyMismatch(f"{FAMILY}: num_local_experts is 0 (a dense 4.0-H config): nncanon serves the "
                             "mixture-of-experts checkpoints (granite-4.0-h-tiny, -small) under this family")
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.post_attention_layernorm",
            "layers.0.mlp", "layers.0.mlp.router", "layers.0.mlp.experts", "layers.0.shared_experts"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    inner = int(config.mamba_expand * config.hidden_size)
    return {"key_heads": config.mamba_n_groups, "heads": config.mamba_n_heads, "key_dim": config.mamba_d_state,
            "value_dim": config.mamba_d_head, "intermediate_size": config.shared_intermediate_size,
            "conv_dim": inner + 2 * config.mamba_n_groups * config.mamba_d_state, "conv_kernel": config.mamba_d_conv,
            "num_experts": config.num_local_experts, "top_k": config.num_experts_per_tok}
