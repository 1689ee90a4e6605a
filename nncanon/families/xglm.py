"""XGLM (XGLMForCausalLM, model_type xglm): fixed sinusoidal positions offset by two rows, a scaled token embedding,
and an MLP with no module of its own.

The stream entering the first block is the token embedding, scaled, plus a position embedding that is not learned:
the embedding module multiplies its rows by √d_model (``scale_embedding``), and ``embed_positions`` reads row p + 2
of a fixed sinusoid table (sines of p · 10000^(−i/(d/2 − 1)) on the first half of the features, cosines on the
second; fairseq's layout, with two leading rows for its padding). ``position_embeddings`` is a root value of its own
and the relation recomputes the table from its formula.

The block is pre-norm, as BioGPT's and OPT's: ``self_attn_layer_norm`` (mounted as ``input_layernorm``) ->
attention -> add, ``final_layer_norm`` (``post_attention_layernorm``) -> fc1 -> GELU -> fc2 -> add, the MLP's values
on the block (``layers[i].mlp_output``). The attention is multi-head with biased ``q_proj``, ``k_proj``, ``v_proj``
and ``out_proj`` (mounted as ``o_proj``), and runs in XGLM's own forward, eager only: the queries are scaled by
head_dim^-0.5 before the scores (as OPT's), and batch and heads are flattened together (``[batch · heads, seq,
head_dim]``); the values show them as ``[batch, heads, seq, head_dim]``, views, so edits land. The final norm is
``model.layer_norm`` (``norm``); the head is tied to the token embedding.
"""

from __future__ import annotations

import sys

from transformers.models.xglm import modeling_xglm as hf

from ..core.hosts import host
from ..core.layouts import HeadOutputs, Keys, Pattern, Queries, Values
from ..core.locators import op
from ..core.model import StandardModel
from ..core.values import IDENTITY, Condition, Value
from ..parts.attention.softmax import ATTENTION_RELATIONS, EAGER, Attention
from ..parts.blocks.decoder import Block, attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.positions import root_relations, root_values
from ..research.weights import Layout
from .biogpt import required_paths  # noqa: F401 (the same tree: fc1, activation_fn, fc2 on the block)
from .bloom import _HEAD_OUTPUTS, _unflat
from .opt import BLOCK_MLP_RELATIONS, block_mlp_values, projections

FAMILY = "xglm"
MODEL_TYPES = ("xglm",)
RENAME = {
    "model.embed_tokens": "embed_tokens",
    "model.embed_positions": "embed_positions",
    "model.layers": "layers",
    "model.layer_norm": "norm",
    "self_attn_layer_norm": "input_layernorm",
    "final_layer_norm": "post_attention_layernorm",
    "out_proj": "o_proj",
}

XGLMBlock = host("XGLMBlock", Block, values=block_mlp_values(view=IDENTITY), RELATIONS=BLOCK_MLP_RELATIONS)

#: XGLM's attention has a softmax of its own for float16 (upcast to float32 and back); the scores are read at the
#: other branch's, which a float16 load never runs
NOT_FLOAT16 = Condition(needs="a dtype other than float16", why="a float16 load runs XGLM's float16 softmax, a branch "
                        "of its own the scores are not read at",
                        holds=lambda model: str(getattr(model._module, "dtype", "")) != "torch.float16")

#: the queries arrive scaled, and the scores are their product with the keys, unscaled
XGLMAttention = host("XGLMAttention", Attention, values=[
    Value("attention_queries", Queries, "The queries entering attention, already scaled by head_dim^-0.5",
          op("torch_bmm_0", io="input", element=0), view=_unflat(), conditions=(EAGER,)),
    Value("attention_keys", Keys, "The keys entering attention", op("torch_bmm_0", io="input", element=1),
          view=_unflat(transposed=True), conditions=(EAGER,)),
    Value("attention_values", Values, "The values entering attention", op("torch_bmm_1", io="input", element=1),
          view=_unflat(), conditions=(EAGER,)),
    # the float32 branch's softmax (the source's second: the first upcasts float16)
    Value("attention_scores", Pattern, "The attention scores entering the softmax, masked",
          op("nn_functional_softmax_1", io="input"), view=_unflat(), conditions=(EAGER, NOT_FLOAT16)),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op("nn_functional_dropout_0"), view=_unflat(), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op("torch_bmm_1"), view=_HEAD_OUTPUTS, conditions=(EAGER,)),
], SCALING=staticmethod(lambda module: 1.0), WEIGHTS=Layout(query_scale="scaling"),
    RELATIONS=(*ATTENTION_RELATIONS, projections(scaled=True)))

ENVOYS = {hf.XGLMDecoderLayer: XGLMBlock, hf.XGLMAttention: XGLMAttention}
# XGLMConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("XGLMStandardModel", StandardModel, values=root_values("model.embed_positions"),
            RELATIONS=root_relations(offset=2, scaled=True, sinusoidal=True), family_module=sys.modules[__name__])

build = text_only(hf.XGLMForCausalLM)
layer_types = attention_layer_types  # XGLMConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.ffn_dim}
