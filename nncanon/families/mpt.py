"""MPT (MptForCausalLM, model_type mpt): ALiBi in place of positions, LayerNorms with no bias, a fused Wqkv, no
biases anywhere.

There is no position embedding: each head adds to its scores a bias linear in the key's position (ALiBi, the
slopes the paper's geometric sequence over the heads). MPT cuts its bias from one table over ``max_seq_len``
columns, ``slope_h · (k − (K − 1))`` for the key in column k of K, so the last key's bias is 0 and a left-padded
row's biases count its padding too: a constant of the row, which the softmax ignores. ``layers[0].layer_input`` is
the token embedding itself.

The block is pre-norm and sequential, as Llama's, with LayerNorms that have a weight and no bias (``norm_1``,
``norm_2``, mounted as ``input_layernorm``, ``post_attention_layernorm``). The MLP (``ffn``, mounted as ``mlp``)
adds its own residual: it returns ``layer_mid + down_proj(...)``, so ``mlp_output`` (what it adds) is read at
``down_proj``, and the block's sums are the usual ``layer_input + attention_output == layer_mid``, ``layer_mid +
mlp_output == layer_output``.

One Linear, ``Wqkv``, computes queries, keys and values, ``[q | k | v]`` side by side (each ``d_model`` wide),
clamped to ±``clip_qkv`` when the config sets it. The attention runs in MPT's own forward, eager only: the scores
are ``q · kᵀ · softmax_scale`` (``1/√head_dim`` unless the config sets it) plus the bias, masked, the softmax in
float32. The MLP is ``down_proj(gelu(up_proj(x)))``, 4 · d_model wide (``expansion_ratio`` is not read by
transformers), GELU exact (``act``, mounted as ``act_fn``). The head is tied to the token embedding.
"""

from __future__ import annotations

import sys

from transformers.models.mpt import modeling_mpt as hf

from ..core.hosts import host
from ..core.layouts import HeadOutputs, Keys, Pattern, Queries, Values
from ..core.locators import child, op
from ..core.model import StandardModel
from ..core.relations import first, pick, relation
from ..core.values import Value
from ..core.views import heads
from ..parts.attention.alibi import COLUMN_ALIBI_RELATIONS
from ..parts.attention.method_attention import HEADS_FIRST, KEYS_TRANSPOSED
from ..parts.attention.softmax import EAGER, HEAD_RESULTS_RELATION, LINK_RELATIONS, Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    Block,
    attention_layer_types,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.ungated import residual_adding_mlp
from ..research.weights import stacked_qkv

FAMILY = "mpt"
MODEL_TYPES = ("mpt",)
RENAME = {
    "transformer.wte": "embed_tokens",
    "transformer.blocks": "layers",
    "transformer.norm_f": "norm",
    "norm_1": "input_layernorm",
    "norm_2": "post_attention_layernorm",
    "attn": "self_attn",
    "out_proj": "o_proj",
    "ffn": "mlp",
    "act": "act_fn",
}

# -- the attention: scores computed in the forward, ALiBi added --------------------------------------

@relation("q | k | v == Wqkv(input) (clamped to ±clip_qkv when set), split in three along the features, then into "
          "heads: attention_queries == q, attention_values == v, attention_keys (the call's last seq positions) == k",
          proves="attention_queries attention_values", reads="input attention_queries attention_keys attention_values")
def _fused_qkv(host, r):
    module = host._module
    x = first(r["input"])
    fused = module.Wqkv(x)
    if module.clip_qkv:
        fused = fused.clamp(min=-module.clip_qkv, max=module.clip_qkv)
    q, k, v = (part.unflatten(-1, (module.n_heads, module.head_dim)).transpose(1, 2) for part in fused.chunk(3, dim=-1))
    seq = x.shape[1]
    return [(q, r["attention_queries"]), (k, r["attention_keys"][:, :, -seq:]),
            (v, r["attention_values"][:, :, -seq:])]


MptAttention = host("MptAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention", op("torch_matmul_0", io="input", element=0),
          conditions=(EAGER,)),
    Value("attention_keys", Keys, "The keys entering attention (the cache's and the call's)",
          op("torch_matmul_0", io="input", element=1), view=KEYS_TRANSPOSED, conditions=(EAGER,)),
    Value("attention_values", Values, "The values entering attention", op("torch_matmul_1", io="input", element=1),
          conditions=(EAGER,)),
    Value("attention_scores", Pattern, "The attention scores entering the softmax: ALiBi's bias and the mask added",
          op("nn_functional_softmax_0", io="input"), conditions=(EAGER,)),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op("nn_functional_dropout_0"), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op("torch_matmul_1"), view=HEADS_FIRST, conditions=(EAGER,)),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=heads()),
], SCALING=staticmethod(lambda module: module.softmax_scale), WEIGHTS=stacked_qkv("Wqkv"),
    RELATIONS=(*COLUMN_ALIBI_RELATIONS, HEAD_RESULTS_RELATION, *LINK_RELATIONS,
               pick(Attention.RELATIONS, "attention_output == o_proj"), _fused_qkv))

MptMLP = residual_adding_mlp("up_proj", "down_proj")

ENVOYS = {hf.MptBlock: Block, hf.MptAttention: MptAttention, hf.MptMLP: MptMLP}
# MptConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("MptStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.MptForCausalLM)
layer_types = attention_layer_types  # MptConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
            "layers.0.self_attn.Wqkv", "layers.0.self_attn.o_proj", "layers.0.post_attention_layernorm",
            "layers.0.mlp", "layers.0.mlp.up_proj", "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": 4 * model.text_config.hidden_size}  # MptMLP is always 4 · d_model wide
