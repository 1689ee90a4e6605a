"""BLOOM (BloomForCausalLM, model_type bloom): ALiBi in place of positions, a LayerNorm on the embeddings, a fused
query_key_value.

There is no position embedding: each head adds to its scores a bias linear in the key's position, ``slope_h ·
p_k`` (ALiBi; the slopes a geometric sequence over the heads), so the attention penalises distance by
``slope_h · (p_q − p_k)``. The token embedding is normed before the first block (``word_embeddings_layernorm``,
mounted as ``embed_layernorm``): ``embedding_norm_output`` is a root value of its own, and it, not
``token_embeddings``, is ``layers[0].layer_input``.

The block is pre-norm and sequential, as Llama's, with LayerNorms (with a bias). BLOOM's modules add their own
residual: the attention returns ``layer_input + dense(...)`` and the MLP ``layer_mid + dense_4h_to_h(...)``, so
``attention_output`` (what the attention adds) is read at the output projection ``dense`` (mounted as
``o_proj``) and ``mlp_output`` at ``dense_4h_to_h`` (``down_proj``), and the block's sums are the usual
``layer_input + attention_output == layer_mid``, ``layer_mid + mlp_output == layer_output``. The family refuses
``apply_residual_connection_post_layernorm`` (the residual taken after the norm), which no released BLOOM sets.

One Linear, ``query_key_value``, computes queries, keys and values, viewed per head as ``[q | k | v]`` (three
head widths side by side, head by head). The attention runs in BLOOM's own forward, eager only: the scores are
``baddbmm(alibi, q, kᵀ, alpha=1/√head_dim)``, with batch and heads flattened together (``[batch · heads, seq,
head_dim]``); the values show them as ``[batch, heads, seq, head_dim]``, views, so edits land. The MLP is
``dense_4h_to_h(gelu(dense_h_to_4h(x)))``, 4 · hidden_size wide, GELU with the tanh approximation
(``gelu_impl``, mounted as ``act_fn``). The head is tied to the token embedding.
"""

from __future__ import annotations

import sys

from transformers.models.bloom import modeling_bloom as hf

from ..core.hosts import host
from ..core.layouts import HeadOutputs, Keys, Pattern, Queries, Residual, Values
from ..core.locators import child, op
from ..core.model import FamilyMismatch, StandardModel
from ..core.relations import pick, relation
from ..core.values import Value, View
from ..core.views import heads
from ..parts.attention.alibi import ALIBI_RELATIONS
from ..parts.attention.softmax import EAGER, HEAD_RESULTS_RELATION, LINK_RELATIONS, Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block, attention_layer_types, text_only
from ..parts.blocks.ungated import residual_adding_mlp
from ..research.weights import interleaved_qkv

FAMILY = "bloom"
MODEL_TYPES = ("bloom",)
RENAME = {
    "transformer.word_embeddings": "embed_tokens",
    "transformer.word_embeddings_layernorm": "embed_layernorm",
    "transformer.h": "layers",
    "transformer.ln_f": "norm",
    "self_attention": "self_attn",
    "dense": "o_proj",
    "gelu_impl": "act_fn",
    "dense_4h_to_h": "down_proj",
}

# -- the root: the embedding normed before the first block -------------------------------------------


@relation("layers[0].layer_input == embedding_norm_output == embed_layernorm(token_embeddings); token_embeddings "
          "== embed_tokens.weight[input_ids]",
          proves="token_embeddings embedding_norm_output",
          reads="input_ids token_embeddings embedding_norm_output layers[0].layer_input")
def _normed_embeddings(host, r):
    return [(host.embed_layernorm._module(r["token_embeddings"]), r["embedding_norm_output"]),
            (r["embedding_norm_output"], r["layers[0].layer_input"]),
            (host.embed_tokens._module.weight[r["input_ids"]], r["token_embeddings"])]


BLOOM_ROOT_VALUES = [
    *ROOT_VALUES[:2],  # logits, token_embeddings; embedding_norm_output next, in the forward's order
    Value("embedding_norm_output", Residual,
          "The token embeddings after the embedding LayerNorm (word_embeddings_layernorm): what enters the first "
          "block", child("embed_layernorm")),
    *ROOT_VALUES[2:],
]
BLOOM_ROOT_RELATIONS = tuple(_normed_embeddings if rel.text == "layers[0].layer_input == token_embeddings" else rel
                             for rel in ROOT_RELATIONS)

# -- the attention: batch and heads flattened together, ALiBi on the scores --------------------------


def _unflat(transposed: bool = False) -> View:
    """``[batch · heads, seq, d]`` as ``[batch, heads, seq, d]`` (keys arrive ``[batch · heads, d, seq]``)."""

    def read(host, x):
        x = x.unflatten(0, (-1, host._module.num_heads))
        return x.transpose(-1, -2) if transposed else x

    def write(host, x, current):
        return (x.transpose(-1, -2) if transposed else x).flatten(0, 1)

    return View("batch-heads" + (" transposed" if transposed else ""), read, write)


#: torch.bmm's output, [batch · heads, seq, head_dim], as [batch, seq, heads, head_dim]
_HEAD_OUTPUTS = View("batch-heads, seq first", lambda host, x: x.unflatten(0, (-1, host._module.num_heads)).transpose(1, 2),
                     lambda host, x, current: x.transpose(1, 2).flatten(0, 1))


@relation("q | k | v == query_key_value(input) viewed [batch, seq, heads, 3, head_dim]: attention_queries == q, "
          "attention_values == v, attention_keys (the call's last seq positions) == k",
          proves="attention_queries attention_values", reads="input attention_queries attention_keys attention_values")
def _fused_qkv(host, r):
    module = host._module
    x = r["input"]
    fused = module.query_key_value(x).view(*x.shape[:2], module.num_heads, 3, module.head_dim).transpose(1, 2)
    seq = x.shape[1]
    return [(fused[..., 0, :], r["attention_queries"]), (fused[..., 1, :], r["attention_keys"][:, :, -seq:]),
            (fused[..., 2, :], r["attention_values"][:, :, -seq:])]


_BADDBMM = "alibi_baddbmm_0"
BloomAttention = host("BloomAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention", op(_BADDBMM, io="input", element="batch1"),
          view=_unflat(), conditions=(EAGER,)),
    Value("attention_keys", Keys, "The keys entering attention", op(_BADDBMM, io="input", element="batch2"),
          view=_unflat(transposed=True), conditions=(EAGER,)),
    Value("attention_values", Values, "The values entering attention", op("torch_bmm_0", io="input", element=1),
          view=_unflat(), conditions=(EAGER,)),
    Value("attention_scores", Pattern, "The attention scores entering the softmax: ALiBi's bias and the mask added",
          op("F_softmax_0", io="input"), conditions=(EAGER,)),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=heads()),
    Value("attention_output", Residual,
          "What the attention adds to the residual stream: dense's output (the module returns it added to its input)",
          child("o_proj")),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op("self_attention_dropout_0"), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op("torch_bmm_0"), view=_HEAD_OUTPUTS, conditions=(EAGER,)),
], SCALING=staticmethod(lambda module: module.inv_norm_factor), WEIGHTS=interleaved_qkv("query_key_value"),
    RELATIONS=(*ALIBI_RELATIONS, HEAD_RESULTS_RELATION, *LINK_RELATIONS, pick(Attention.RELATIONS, "attention_output == o_proj"),
               _fused_qkv))

BloomMLP = residual_adding_mlp("dense_h_to_4h", "dense_4h_to_h")

ENVOYS = {hf.BloomBlock: Block, hf.BloomAttention: BloomAttention, hf.BloomMLP: BloomMLP}
# BloomConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("BloomStandardModel", StandardModel, values=BLOOM_ROOT_VALUES, RELATIONS=BLOOM_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.BloomForCausalLM)
layer_types = attention_layer_types  # BloomConfig has no layer_types: full attention on every block


def prepare(model: StandardModel) -> None:
    """Refuse the residual taken after the norm, and the tensor-parallel slicing: the values and relations here are
    the released checkpoints' block. The user's config is left as it was given."""
    config = model.text_config
    if config.apply_residual_connection_post_layernorm or (config.pretraining_tp > 1 and config.slow_but_exact):
        raise FamilyMismatch(f"{FAMILY}: apply_residual_connection_post_layernorm or slow_but_exact with "
                             "pretraining_tp > 1; nncanon serves BLOOM with the residual before the norm and one "
                             "dense per projection, as the released checkpoints run")


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "embed_layernorm", "layers", "norm", "lm_head", "layers.0.input_layernorm",
            "layers.0.self_attn", "layers.0.self_attn.query_key_value", "layers.0.self_attn.o_proj",
            "layers.0.post_attention_layernorm", "layers.0.mlp", "layers.0.mlp.dense_h_to_4h",
            "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": 4 * model.text_config.hidden_size}  # BloomMLP is always 4 · hidden_size wide
