"""OLMo 2 (Olmo2ForCausalLM, model_type olmo2): norms after each sublayer, inside the residual branch,
and query/key norms over the whole projection.

There is no norm before the attention or before the MLP: the attention is called with the residual
stream itself, and what it adds is post_attention_layernorm of its output; the MLP is called with the
stream after that add, and what it adds is post_feedforward_layernorm of its output:

    h   = x + post_attention_layernorm(self_attn(x))
    out = h + post_feedforward_layernorm(mlp(h))

So the shared block's reading points move. layer_mid (the stream after the attention add) is read
where the add's result goes, the MLP's input, not at post_attention_layernorm's input (which is the
attention's raw output). attention_norm_output and mlp_norm_output do not exist. Two values are
OLMo 2's own: attention_post_norm_output and mlp_post_norm_output, what each branch adds to the
stream; attention_output and mlp_output stay the sublayers' own outputs, before their post-norm. The
MLP's input is the very tensor layer_mid is, so an edit of mlp_input is an edit of the stream.

The attention RMS-normalizes q_proj's whole output (num_attention_heads × head_dim wide) as one
vector with q_norm, and k_proj's whole output with k_norm, before splitting heads and the rotary
embedding: unlike Qwen3's per-head norms, heads are normed together. The MLP is Llama's gated SwiGLU.
"""

from __future__ import annotations

import sys

from transformers.models.olmo2 import modeling_olmo2 as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import FIRST, child, own
from ..core.model import StandardModel
from ..core.relations import relation
from ..core.values import Value, never
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_RENAME,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP

FAMILY = "olmo2"
MODEL_TYPES = ("olmo2",)
RENAME = TEXT_RENAME

# -- the block's relations: post-norms inside the residual branches ------------------------------


@relation("attention_post_norm_output == post_attention_layernorm(self_attn.attention_output); "
          "self_attn is called with layer_input itself (no norm before it)",
          proves="attention_post_norm_output self_attn.attention_output",
          reads="layer_input self_attn.input self_attn.attention_output attention_post_norm_output")
def _attention_post_norm(host, r):
    return [(host.post_attention_layernorm._module(r["self_attn.attention_output"]), r["attention_post_norm_output"]),
            (r["layer_input"], r["self_attn.input"])]


@relation("layer_input + attention_post_norm_output == layer_mid", proves="layer_mid",
          reads="layer_input attention_post_norm_output layer_mid",
          adds=("layer_input", "attention_post_norm_output", "layer_mid"))
def _attention_add(host, r):
    return [(r["layer_input"] + r["attention_post_norm_output"], r["layer_mid"])]


@relation("mlp_input == layer_mid (no norm before the MLP)", proves="mlp_input", reads="layer_mid mlp_input")
def _mlp_reads_stream(host, r):
    return [(r["layer_mid"], r["mlp_input"])]


@relation("mlp_post_norm_output == post_feedforward_layernorm(mlp.mlp_output)",
          proves="mlp_post_norm_output mlp.mlp_output", reads="mlp.mlp_output mlp_post_norm_output")
def _mlp_post_norm(host, r):
    return [(host.post_feedforward_layernorm._module(r["mlp.mlp_output"]), r["mlp_post_norm_output"])]


@relation("layer_mid + mlp_post_norm_output == layer_output", proves="layer_output",
          reads="layer_mid mlp_post_norm_output layer_output",
          adds=("layer_mid", "mlp_post_norm_output", "layer_output"))
def _mlp_add(host, r):
    return [(r["layer_mid"] + r["mlp_post_norm_output"], r["layer_output"])]


POST_NORM_RELATIONS = (_attention_post_norm, _attention_add, _mlp_reads_stream, _mlp_post_norm, _mlp_add)

_NO_PRE_ATTENTION_NORM = never("A post-norm block (OLMo 2, OLMo 3, EXAONE 4) has no norm before the attention: the attention is called with "
                               "layer_input itself (its norm is post_attention_layernorm, after it)")
_NO_PRE_MLP_NORM = never("A post-norm block (OLMo 2, OLMo 3, EXAONE 4) has no norm before the MLP: the MLP is called with layer_mid itself "
                         "(its norm is post_feedforward_layernorm, after it)")

#: the post-norm block: each sublayer reads the stream, its output is normed, then added
PostNormBlock = host("PostNormBlock", Block, values=[
    Value("attention_norm_output", Residual, "The normed stream entering the attention",
          child("input_layernorm"), conditions=(_NO_PRE_ATTENTION_NORM,)),
    Value("layer_mid", Residual, "The residual stream after the attention add", child("mlp", "input"),
          assign_in_place=True),
    Value("mlp_norm_output", Residual, "The normed stream entering the MLP",
          child("pre_feedforward_layernorm"), conditions=(_NO_PRE_MLP_NORM,)),
    Value("mlp_input", Residual,
          "What the MLP is called with: on OLMo 2 the stream itself, the tensor layer_mid is, so an edit "
          "of it is an edit of layer_mid", child("mlp", "input"), assign_in_place=True),
    Value("attention_post_norm_output", Residual,
          "What the attention adds to the residual stream: post_attention_layernorm of its output",
          child("post_attention_layernorm")),
    Value("mlp_post_norm_output", Residual,
          "What the MLP adds to the residual stream: post_feedforward_layernorm of its output",
          child("post_feedforward_layernorm")),
    Value("layer_output", Residual,
          "The residual stream leaving the block, a tensor even when the block returns a tuple",
          own("output", element=FIRST)),
], RELATIONS=POST_NORM_RELATIONS)

#: the attention's and the MLP's own outputs are read before their post-norm
PostNormAttention = host("PostNormAttention", Attention, values=[
    Value("attention_output", Residual,
          "The attention's own output (o_proj's), before post_attention_layernorm; what the block adds "
          "is attention_post_norm_output", own("output", element=0)),
])
PostNormMLP = host("PostNormMLP", MLP, values=[
    Value("mlp_output", Residual,
          "The MLP's own output (down_proj's), before post_feedforward_layernorm; what the block adds "
          "is mlp_post_norm_output", own("output")),
])

ENVOYS = {hf.Olmo2DecoderLayer: PostNormBlock, hf.Olmo2Attention: PostNormAttention, hf.Olmo2MLP: PostNormMLP}
ROOT = host("Olmo2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Olmo2ForCausalLM)
layer_types = attention_layer_types  # Olmo2Config has no layer_types: full attention on every block
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.self_attn", "layers.0.self_attn.q_norm",
            "layers.0.self_attn.k_norm", "layers.0.post_attention_layernorm", "layers.0.mlp",
            "layers.0.post_feedforward_layernorm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
