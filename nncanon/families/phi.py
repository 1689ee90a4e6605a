"""Phi-1, Phi-1.5, Phi-2 (PhiForCausalLM, model_type phi): a parallel block off one LayerNorm, partial rotary, biases.

Every block norms its input once (``input_layernorm``) and hands that one normed stream to both the attention and
the MLP; both outputs are added to the stream in one sum:

    out = x + attention(input_layernorm(x)) + mlp(input_layernorm(x))

So there is no ``post_attention_layernorm``: ``mlp_norm_output`` is not served (the MLP reads
``attention_norm_output``), and no tensor is the stream after the attention add (``layer_mid``), as on GPT-J.
The block's relations state the sum and what the MLP reads.

The attention has separate ``q_proj``, ``k_proj``, ``v_proj`` and an output projection ``dense`` (mounted as
``o_proj``), all with biases, and as many key/value heads as query heads on every released checkpoint. The
rotary embedding turns only the first ``head_dim · partial_rotary_factor`` dimensions of each query and key head
(0.4 on Phi-2: 32 of 80), in halves (dimension j with j + rotary/2, ``rotate_half``); the rest pass through as
projected. The family refuses ``qk_layernorm`` (no released checkpoint sets it). The MLP is not gated:
``fc2(gelu(fc1(x)))`` (``fc2`` mounted as ``down_proj``, ``activation_fn`` as ``act_fn``). The final norm is a
LayerNorm, ``model.final_layernorm`` (``norm``), and the head is untied, with a bias.
"""

from __future__ import annotations

import sys

from transformers.models.phi import modeling_phi as hf

from ..core.hosts import host
from ..core.model import FamilyMismatch, StandardModel
from ..parts.attention import rotary
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, attention_layer_types, text_only
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.ungated import ungated_mlp

FAMILY = "phi"
MODEL_TYPES = ("phi",)
RENAME = {
    "model.embed_tokens": "embed_tokens",
    "model.layers": "layers",
    "model.final_layernorm": "norm",
    "dense": "o_proj",
    "activation_fn": "act_fn",
    "fc2": "down_proj",
}


_rotated_projections = rotary.projected("rotary_ndims", rotary.HALVES)

PhiAttention = host("PhiAttention", Attention, RELATIONS=(*ATTENTION_RELATIONS, _rotated_projections))

ENVOYS = {hf.PhiDecoderLayer: parallel_block("Phi's block", one_norm=True), hf.PhiAttention: PhiAttention,
          hf.PhiMLP: ungated_mlp("fc1")}
ROOT = host("PhiStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.PhiForCausalLM)
layer_types = attention_layer_types  # PhiConfig has no layer_types: full attention on every block


def prepare(model: StandardModel) -> None:
    """Refuse q/k LayerNorms: the relations here rotate the projections as they come. The user's config is left as
    it was given."""
    if model.text_config.qk_layernorm:
        raise FamilyMismatch(f"{FAMILY}: qk_layernorm is true; nncanon serves Phi checkpoints without q/k norms, "
                             "as Phi-1, Phi-1.5 and Phi-2 are released")


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
            "layers.0.self_attn.q_proj", "layers.0.self_attn.o_proj", "layers.0.mlp", "layers.0.mlp.fc1",
            "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
