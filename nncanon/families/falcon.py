"""Falcon (FalconForCausalLM, model_type falcon): Falcon-7B's parallel block with one LayerNorm and multi-query
attention from one fused query_key_value.

The block is parallel with one LayerNorm (``parallel_attn``, ``new_decoder_architecture`` false): the attention
and the MLP both read ``input_layernorm``'s output, and the block returns ``layer_input + (mlp_output +
attention_output)``, so no tensor is the stream after the attention add (``parts/parallel.py``). The norms are
LayerNorms with a weight and a bias; every Linear is bias-free (``bias`` false), the MLP is ``dense_4h_to_h(gelu(
dense_h_to_4h(x)))``, ``ffn_hidden_size`` wide, and the head is tied to the token embedding.

The attention is multi-query (``multi_query``): one key head and one value head serve every query head. One
Linear, ``query_key_value``, computes them all, ``hidden_size + 2 · head_dim`` wide, viewed as ``num_heads + 2``
heads: the query heads, then the key head, then the value head (the module's own ``_split_heads``). The rotary
embedding turns the whole of every query and key head, in halves (``rotate_half``). FalconConfig keeps
``num_kv_heads`` equal to the heads when ``multi_query`` is set; the attention uses one, and so does the
family's ``num_kv_heads``. Falcon's attention is written out in its own forward, once for sdpa and once for
eager: the queries and keys are read where the rotary returns them, the values where they are put in heads, the
head outputs where they are permuted to ``[batch, seq, heads, head_dim]``, all common to both; the scores and
the pattern exist on eager only.

The family refuses Falcon-40B's layout (``new_decoder_architecture``: grouped key/value heads interleaved with
their query groups and two LayerNorms, ``ln_attn`` and ``ln_mlp``) and Falcon-RW's (``alibi``, the sequential
block, biases): their values sit elsewhere and no tiny recipe proves them yet.
"""

from __future__ import annotations

import sys

from transformers.models.falcon import modeling_falcon as hf

from ..hosts import host
from ..layouts import HeadOutputs, Keys, Pattern, Queries, Values
from ..locators import op
from ..model import FamilyMismatch, StandardModel
from ..parts import rotary
from ..parts.attention import ATTENTION_RELATIONS, EAGER, Attention
from ..parts.decoder import ROOT_RELATIONS, ROOT_VALUES, attention_layer_types, text_only
from ..parts.parallel import parallel_block
from ..parts.ungated import ungated_mlp
from ..relations import first, relation
from ..values import Value
from ..weights import stacked_qkv

FAMILY = "falcon"
MODEL_TYPES = ("falcon",)
RENAME = {
    "transformer.word_embeddings": "embed_tokens",
    "transformer.h": "layers",
    "transformer.ln_f": "norm",
    "self_attention": "self_attn",
    "self_attention.dense": "self_attention.o_proj",
    "act": "act_fn",
    "dense_4h_to_h": "down_proj",
}

# -- the block: parallel, one LayerNorm ----------------------------------------------------------------------------

ParallelBlock = parallel_block("Falcon-7B's block", flag="parallel_attn", one_norm=True)

# -- the attention: multi-query from one fused query_key_value, the rotary on whole heads ---------------------------


@relation("q, k, v == query_key_value(input) split by the module's own _split_heads == viewed [batch, seq, "
          "num_heads + 2, head_dim]: the query heads, then one key and one value head shared by every query head "
          "(multi_query); "
          "attention_values == v; attention_queries and attention_keys are q and k in heads, "
          + rotary.describe("head_dim", rotary.HALVES),
          proves="attention_values", reads="input attention_queries attention_keys attention_values")
def _fused_multi_query(host, r):
    module = host._module
    x = first(r["input"])
    fused = module.query_key_value(x)
    q, k, v = module._split_heads(fused)
    # the layout written independently of _split_heads: num_heads query heads, then the key's, then the value's
    heads = fused.unflatten(-1, (module.num_heads + 2, module.head_dim))
    d = module.head_dim
    return [(heads[:, :, :-2], q), (heads[:, :, -2:-1], k), (heads[:, :, -1:], v),
            (v.transpose(1, 2).double(), r["attention_values"].double()),
            *rotary.rotated(q.transpose(1, 2), r["attention_queries"], d, rotary.HALVES),
            *rotary.rotated(k.transpose(1, 2), r["attention_keys"], d, rotary.HALVES)]


_ROTARY = "apply_rotary_pos_emb_0"
MultiQueryAttention = host("MultiQueryAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention: the rotary's output",
          op(_ROTARY, element=0)),
    Value("attention_keys", Keys, "The keys entering attention: the rotary's output (one head, multi_query)",
          op(_ROTARY, element=1)),
    Value("attention_values", Values, "The values entering attention, in heads (one head, multi_query)",
          op("reshape_2")),
    Value("attention_scores", Pattern, "The attention scores entering the softmax, scaled and masked",
          op("F_softmax_0", io="input"), conditions=(EAGER,)),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op("F_softmax_0"), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op("attn_output_permute_0")),
], SCALING=staticmethod(lambda module: module.inv_norm_factor), WEIGHTS=stacked_qkv("query_key_value"),
    RELATIONS=(*ATTENTION_RELATIONS, _fused_multi_query))

ENVOYS = {hf.FalconDecoderLayer: ParallelBlock, hf.FalconAttention: MultiQueryAttention,
          hf.FalconMLP: ungated_mlp("dense_h_to_4h")}


class FalconStandardModel(host("FalconStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
                               family_module=sys.modules[__name__])):
    @property
    def num_kv_heads(self) -> int:
        """One key and one value head under multi_query: FalconConfig sets num_kv_heads to the heads unless
        new_decoder_architecture, and the attention uses it only then."""
        config = self.text_config
        return config.num_kv_heads if config.new_decoder_architecture else 1 if config.multi_query else self.num_heads


ROOT = FalconStandardModel

build = text_only(hf.FalconForCausalLM)
layer_types = attention_layer_types  # FalconConfig has no layer_types: full attention on every block


def prepare(model: StandardModel) -> None:
    """Refuse every layout but Falcon-7B's: the values and relations here are its block's. The user's config is
    left as it was given."""
    config = model.text_config
    if config.new_decoder_architecture or config.alibi or not config.parallel_attn or not config.multi_query:
        raise FamilyMismatch(f"{FAMILY}: new_decoder_architecture, alibi, parallel_attn false or multi_query false; "
                             "nncanon serves Falcon with Falcon-7B's layout (the parallel block with one LayerNorm, "
                             "multi-query attention, the rotary embedding)")


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
            "layers.0.self_attn.query_key_value", "layers.0.self_attn.o_proj", "layers.0.mlp",
            "layers.0.mlp.dense_h_to_4h", "layers.0.mlp.act_fn", "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.ffn_hidden_size}
