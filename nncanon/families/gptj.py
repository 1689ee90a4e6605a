"""GPT-J (GPTJForCausalLM, model_type gptj): one LayerNorm feeding a parallel block, interleaved partial rotary.

Every block norms its input once (``ln_1``, mounted as ``input_layernorm``) and hands that one normed
stream to both the attention and the MLP; both outputs are added to the stream in one sum:

    out = x + attention(input_layernorm(x)) + mlp(input_layernorm(x))

So there is no ``post_attention_layernorm`` and no ``mlp_norm_output`` (the MLP reads
``attention_norm_output``), and no tensor is the stream after the attention add (``layer_mid``). The
block's relations state the sum and what the MLP reads.

The attention is multi-head, with separate bias-free ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj``
(mounted as ``o_proj``). The rotary embedding turns only the first ``rotary_dim`` dimensions of each query and
key head (64 of 256 on GPT-J-6B), in adjacent pairs (dimension 2j with 2j+1, ``rotate_every_two``), not in
halves as GPT-NeoX and Llama do; the rest of each head passes through as projected. The attention is computed
in a method of its own (``_attn``), eager only, under transformers 5.23; from 5.24 GPT-J calls the shared
attention interface (the Releases page lists what moved). Its scores are divided
by ``scale_attn`` (√head_dim) before the mask is added. The MLP is not gated: ``fc_out(act(fc_in(x)))``
(``fc_out`` mounted as ``down_proj``, ``act`` as ``act_fn``), GELU with the tanh approximation. The head,
``lm_head``, is untied and has a bias; the final norm is ``transformer.ln_f`` (``norm``). There are no
position embeddings: the first block reads the token embedding itself.
"""

from __future__ import annotations

import sys

from transformers.models.gptj import modeling_gptj as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention import rotary
from ..parts.attention.method_attention import release_attention
from ..parts.attention.softmax import ATTENTION_RELATIONS
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.ungated import n_inner_sizes, ungated_mlp

FAMILY = "gptj"
MODEL_TYPES = ("gptj",)
RENAME = {
    "transformer.wte": "embed_tokens",
    "transformer.h": "layers",
    "transformer.ln_f": "norm",
    "ln_1": "input_layernorm",
    "attn": "self_attn",
    "out_proj": "o_proj",
    "act": "act_fn",
    "fc_out": "down_proj",
}


_rotated_projections = rotary.projected("rotary_dim", rotary.ADJACENT)

#: SIN_FIRST: from 5.24 its rotary_emb hands the attention (sin, cos), not (cos, sin) (nncanon.parts.weights)
#: GPT-J divides the scores by scale_attn (√head_dim, a float32 buffer-free attribute) where its release has _attn
GPTJAttention = release_attention("GPTJAttention", hf.GPTJAttention, lambda module: 1.0 / module.scale_attn,
                                  (*ATTENTION_RELATIONS, _rotated_projections), SIN_FIRST=True)

ENVOYS = {hf.GPTJBlock: parallel_block("GPT-J's block", one_norm=True), hf.GPTJAttention: GPTJAttention,
          hf.GPTJMLP: ungated_mlp("fc_in")}


# GPTJConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("GPTJStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.GPTJForCausalLM)
layer_types = attention_layer_types  # GPTJConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare
dim_sizes = n_inner_sizes  # the MLP is n_inner wide, or 4 · hidden_size


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
            "layers.0.self_attn.q_proj", "layers.0.self_attn.k_proj", "layers.0.self_attn.v_proj",
            "layers.0.self_attn.o_proj", "layers.0.mlp", "layers.0.mlp.fc_in", "layers.0.mlp.act_fn",
            "layers.0.mlp.down_proj"]
