"""OLMo Hybrid (OlmoHybridForCausalLM, model_type olmo_hybrid): gated DeltaNet blocks and OLMo 2's post-norm
attention blocks in one stack.

``config.layer_types`` names each block's kind: ``linear_attention`` (three blocks in four on the released
checkpoints) or ``full_attention`` (every fourth). The two kinds are two block classes that norm in opposite
places. A DeltaNet block is Llama's pre-norm block with the gated DeltaNet mixer ``linear_attn``:

    h   = x + linear_attn(input_layernorm(x))
    out = h + mlp(post_attention_layernorm(h))

An attention block is OLMo 2's (nncanon.families.olmo2): no norm before a sublayer, each sublayer's output
RMS-normed before it is added, and ``post_attention_layernorm`` there is the attention's output norm:

    h   = x + post_attention_layernorm(self_attn(x))
    out = h + post_feedforward_layernorm(mlp(h))

The attention norms its query and key projections as one vector across every head (q_norm, k_norm, as OLMo 2).
The released configs set ``rope_theta`` to null and the model then builds no rotary embedding: the attention
blocks get no position signal at all (global NoPE), order reaching them only through the causal mask and the
DeltaNet blocks. The DeltaNet (`nncanon.parts.recurrent.deltanet`) projects q, k, v, a, b and its output gate
with separate projections (``q_proj`` ... ``g_proj``), norms its heads by the gated ``o_norm`` (served as
``norm``) and projects back with ``o_proj``; with ``linear_allow_neg_eigval`` (set on the released checkpoints)
it doubles the sigmoid of ``b_proj``, so ``betas`` lie in (0, 2).
"""

from __future__ import annotations

import sys

from transformers.models.olmo_hybrid import modeling_olmo_hybrid as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.nope import rotary_or_not
from ..parts.attention.softmax import ATTENTION_RELATIONS
from ..parts.blocks import decoder
from ..parts.blocks.mlp import MLP
from ..parts.recurrent import deltanet, hybrid
from ..parts.recurrent.deltanet import KERNELS, DeltaNet  # noqa: F401 (the family API, shared)
from .olmo2 import PostNormAttention, PostNormBlock

FAMILY = "olmo_hybrid"
MODEL_TYPES = ("olmo_hybrid",)
#: the DeltaNet's gated norm o_norm takes the shared DeltaNet's name
RENAME = {**decoder.TEXT_RENAME, "o_norm": "norm"}


def _rotates(module) -> bool:
    """The model's own test: it builds a rotary embedding only when the config gives a rope_theta."""
    return (getattr(module.config, "rope_parameters", None) or {}).get("rope_theta") is not None


HybridAttention = host("HybridAttention", PostNormAttention, RELATIONS=(
    *ATTENTION_RELATIONS, rotary_or_not(hf.apply_rotary_pos_emb, flag=_rotates, normed="whole",
                                        rotated_on="where the config gives a rope_theta",
                                        nope_on="where its rope_theta is null, as on the released checkpoints")))

ENVOYS = {hf.OlmoHybridLinearAttentionDecoderLayer: decoder.Block, hf.OlmoHybridAttentionDecoderLayer: PostNormBlock,
          hf.OlmoHybridAttention: HybridAttention, hf.OlmoHybridGatedDeltaNet: DeltaNet, hf.OlmoHybridMLP: MLP}
ROOT = host("OlmoHybridStandardModel", StandardModel, values=decoder.ROOT_VALUES, RELATIONS=decoder.ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = decoder.text_only(hf.OlmoHybridForCausalLM)
layer_types = deltanet.layer_types
MIXERS = deltanet.MIXERS
explain_missing = hybrid.explain_missing(MIXERS, layer_types)


def required_paths(model: StandardModel) -> list[str]:
    return [*deltanet.HYBRID_PATHS, "layers.0.input_layernorm", "layers.0.linear_attn", "layers.0.mlp"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size, **deltanet.dim_sizes(model)}


def prepare(model: StandardModel) -> None:
    deltanet.prepare(model, hf)
