"""CodeGen (CodeGenForCausalLM, model_type codegen): GPT-J's parallel block with one fused qkv projection split in
four model-parallel chunks.

The block is GPT-J's (the same host, nncanon.parts.blocks.parallel): one LayerNorm (``ln_1``, mounted as
``input_layernorm``) feeds both the attention and the MLP, and both outputs are added to the stream in one sum:

    out = x + attention(input_layernorm(x)) + mlp(input_layernorm(x))

so there is no ``mlp_norm_output`` and no ``layer_mid``. The MLP is GPT-J's, not gated: ``fc_out(gelu(fc_in(x)))``
with biases (``fc_out`` mounted as ``down_proj``, ``act`` as ``act_fn``). The rotary is GPT-J's too: the first
``rotary_dim`` dimensions of each query and key head turn in adjacent pairs (``rotate_every_two``), the rest pass
through.

What CodeGen adds is the projection. ``qkv_proj`` is one bias-free linear map of width 3 · hidden, laid out for the
four TPU cores CodeGen was trained on (``mp_num`` = 4): its output is four equal chunks, and each chunk holds, in
this order, the queries, the values and the keys of a quarter of the heads (heads 0 .. n/4 - 1 in the first chunk,
and so on). So neither the thirds of the output nor the order q, k, v are the heads; the attention's relation
recomputes the queries, keys and values from ``qkv_proj``'s output by that split. ``out_proj`` (mounted as
``o_proj``) has no bias. Under transformers 5.23 the attention is computed in a method of its own (``_attn``), eager
only, and divides the masked scores by ``scale_attn`` (√head_dim); from 5.24 CodeGen calls the shared attention
interface. The head, ``lm_head``, is untied and has a bias; the final norm is ``transformer.ln_f`` (``norm``).
There are no position embeddings.
"""

from __future__ import annotations

import sys

from transformers.models.codegen import modeling_codegen as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import first, relation
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
from ..research.weights import Layout, Projection

FAMILY = "codegen"
MODEL_TYPES = ("codegen",)
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

#: the four model-parallel shards of CodeGen's training, a literal in its forward (``mp_num = 4``)
MP_NUM = 4


def split_qkv(module, x):
    """Queries, values and keys ``[batch, heads, seq, head_dim]`` from ``qkv_proj(x)``: four chunks, each holding
    the queries, values and keys (in that order) of a quarter of the heads."""
    qkv = module.qkv_proj(x)
    chunks = qkv.unflatten(-1, (MP_NUM, -1))  # [batch, seq, 4, 3 · hidden / 4]
    local = chunks.shape[-1] // 3
    query, value, key = chunks.split(local, dim=-1)

    def in_heads(t):
        return t.reshape(*t.shape[:2], -1, module.head_dim).transpose(1, 2)

    return in_heads(query), in_heads(value), in_heads(key)


@relation("qkv_proj(input) is four chunks (mp_num = 4), each [queries | values | keys] of a quarter of the heads: "
          "attention_values == the value parts in heads; attention_queries and attention_keys (the call's last seq "
          "positions) are the query and key parts in heads, " + rotary.describe("rotary_dim", rotary.ADJACENT),
          proves="attention_values", reads="input attention_queries attention_keys attention_values")
def _split_projection(host, r):
    module = host._module
    x = first(r["input"])
    seq, d = x.shape[1], module.rotary_dim or module.head_dim
    query, value, key = split_qkv(module, x)
    return [(value.double(), r["attention_values"][:, :, -seq:].double()),
            *rotary.rotated(query, r["attention_queries"], d, rotary.ADJACENT),
            *rotary.rotated(key, r["attention_keys"][:, :, -seq:], d, rotary.ADJACENT)]


def _chunk_part(slot: int):
    """Part ``slot`` (0 the queries, 1 the values, 2 the keys) of each of qkv_proj's mp_num chunks, as ``[...,
    mp_num, heads / mp_num, head_dim]``: head i is chunk i // (heads / mp_num), place i % (heads / mp_num)."""
    return lambda host, t: t.unflatten(-1, (MP_NUM, 3, -1, host._module.head_dim)).select(-3, slot)


#: W_Q, W_K, W_V from qkv_proj by the split the relation above proves; no stride walks a part's heads in order
#: across the chunks, so each is served gathered, its edits written back into qkv_proj (nncanon.research.gathered)
_WEIGHTS = Layout(q=Projection("qkv_proj", _chunk_part(0), grouped=True),
                  k=Projection("qkv_proj", _chunk_part(2), grouped=True),
                  v=Projection("qkv_proj", _chunk_part(1), grouped=True))

#: SIN_FIRST: from 5.24 its rotary_emb hands the attention (sin, cos), not (cos, sin) (nncanon.parts.weights)
#: where its release has _attn, CodeGen divides the (masked) scores by scale_attn (√head_dim) and softmaxes them by
#: building nn.Softmax and calling it (the call, call_0, reads the scores); the relations compare the scores where a
#: key is allowed, where adding the mask before or after the division is the same
CodeGenAttention = release_attention("CodeGenAttention", hf.CodeGenAttention, lambda module: 1.0 / module.scale_attn,
                                     (*ATTENTION_RELATIONS, _split_projection), softmax="call_0", WEIGHTS=_WEIGHTS,
                                     SIN_FIRST=True)

ENVOYS = {hf.CodeGenBlock: parallel_block("CodeGen's block", one_norm=True), hf.CodeGenAttention: CodeGenAttention,
          hf.CodeGenMLP: ungated_mlp("fc_in")}

# CodeGenConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("CodeGenStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.CodeGenForCausalLM)
layer_types = attention_layer_types  # CodeGenConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare
dim_sizes = n_inner_sizes  # the MLP is n_inner wide, or 4 · hidden_size


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
            "layers.0.self_attn.qkv_proj", "layers.0.self_attn.o_proj", "layers.0.mlp", "layers.0.mlp.fc_in",
            "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]
