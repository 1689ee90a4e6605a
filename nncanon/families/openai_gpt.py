"""GPT-1 (OpenAIGPTLMHeadModel, model_type openai-gpt): post-norm blocks, learned absolute positions, no final norm.

The stream entering the first block is the token embedding plus a learned position embedding
(``transformer.positions_embed``, mounted as ``embed_positions``): ``position_embeddings`` is a root value of its
own, and ``layers[0].layer_input`` is the sum. There is no norm on the embeddings and none after the last block:
the tied head reads ``layers[-1].layer_output`` itself, which is already a LayerNorm's output, since every block is
post-norm (``final_norm_output`` does not exist; the lens applies the head alone).

Each block adds, then norms: ``layer_mid = layer_input + attention(layer_input)`` (no norm before the attention),
``ln_1`` norms it into what the MLP reads and what its output is added to, and ``ln_2`` norms that sum into
``layer_output``; the norms keep GPT-1's names (``ln_1``, ``ln_2``), since neither sits where a pre-norm block's
would. The MLP is GPT-2's: ``c_proj(act(c_fc(x)))``, Conv1D projections, not gated, 4 · n_embd wide; GELU with the
tanh approximation (``afn`` gelu is transformers' ``gelu_new``, a function, not a module: ``mlp_activation`` is read
where it is called). The attention's queries, keys and values come from one fused Conv1D, ``c_attn``, and the
pattern is computed in the ``_attn`` method, eager only: ``q · kᵀ / √head_dim``, the causal mask applied as
``w · b − 10⁴ · (1 − b)``, then the padding mask. The keys arrive at ``_attn`` transposed (``[batch, heads, head_dim,
seq]``); the values show them as ``[batch, heads, seq, head_dim]``, a view, so edits land.
"""

from __future__ import annotations

import math
import sys

from transformers.models.openai import modeling_openai as hf

from ..core.hosts import host
from ..core.layouts import HeadOutputs, Keys, Neurons, Residual
from ..core.locators import child, op, own
from ..core.model import StandardModel
from ..core.relations import first, relation
from ..core.values import Value, View, never
from ..parts.attention.method_attention import KEYS_TRANSPOSED, method_attention
from ..parts.attention.softmax import ATTENTION_RELATIONS, EAGER, head_results_value
from ..parts.blocks.decoder import Block, attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.positions import root_relations, root_values
from ..parts.encoders import post_norm
from ..research.weights import stacked_qkv
from .gpt2 import GPT2MLP, _c_proj, _fused_qkv

FAMILY = "openai_gpt"
MODEL_TYPES = ("openai-gpt",)
RENAME = {
    "transformer.tokens_embed": "embed_tokens",
    "transformer.positions_embed": "embed_positions",
    "transformer.h": "layers",
    "attn": "self_attn",
}

# -- the root: token plus learned positions, no final norm --------------------------------------------


@relation("lm_head_output == lm_head(layers[-1].layer_output): no final norm (each block ends in its own LayerNorm)",
          proves="lm_head_output", reads="layers[-1].layer_output lm_head_output")
def _head(host, r):
    return [(host.lm_head._module(first(r["layers[-1].layer_output"])), r["lm_head_output"])]


_NO_NORM = never("GPT-1 has no final norm: each block ends in its own LayerNorm (ln_2), which the head reads")
ROOT_VALUES = [v if v.name != "final_norm_output" else Value(v.name, Residual, v.description, child("norm"),
                                                             conditions=(_NO_NORM,))
               for v in root_values("transformer.positions_embed")]
ROOT_RELATIONS = (*(rel for rel in root_relations() if not rel.text.startswith(("final_norm_output ==",
                                                                                  "lm_head_output =="))), _head)

# -- the block: post-norm, each LayerNorm after its add --------------------------------------------------

OpenAIGPTBlock = host("OpenAIGPTBlock", Block, values=[
    Value("attention_norm_output", Residual, "The normed stream entering the attention", child("self_attn", "input"),
          conditions=(never("GPT-1's block is post-norm: the attention reads layer_input itself, and ln_1 norms "
                            "layer_mid after the add"),)),
    Value("layer_mid", Residual, "The residual stream after the attention add, before ln_1 norms it",
          child("ln_1", "input")),
    Value("mlp_norm_output", Residual, "ln_1(layer_mid): the stream the MLP reads and its output is added to",
          child("ln_1")),
    # the MLP's input is also the residual its output is added to: an assignment writes into it, as an edit does
    Value("mlp_input", Residual, "What the MLP is called with, and the residual its output is added to",
          child("mlp", "input"), assign_in_place=True),
    # the block returns a list, [h]: its element 0 (an edit hands the model a tuple, which it indexes alike)
    Value("layer_output", Residual, "The residual stream leaving the block: ln_2(mlp_input + mlp.mlp_output)",
          own("output", element=0)),
], RELATIONS=(*post_norm.STREAM_RELATIONS,
              post_norm.post_norms(lambda module: module.ln_1, lambda module: module.ln_2, "mlp.mlp_output")))

# -- the attention: c_attn fused, the pattern in _attn ----------------------------------------------------


#: [batch, seq, n_embd] as [batch, seq, heads, head_dim]: GPT-1's Attention holds n_head, not a head width
_BY_HEAD = View("heads(n_head)", lambda host, x: x.unflatten(-1, (host._module.n_head, -1)),
                lambda host, x, current: x.flatten(-2))


def _scaling(module) -> float:
    return 1 / math.sqrt(module.split_size // module.n_head)


OpenAIGPTAttention = host("OpenAIGPTAttention", method_attention(_scaling), values=[
    Value("attention_keys", Keys, "The keys entering attention", op("self__attn_0", io="input", element=1),
          view=KEYS_TRANSPOSED, conditions=(EAGER,)),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection c_proj takes it",
          child("c_proj", "input"), view=_BY_HEAD),
    head_results_value("c_proj"),
], WEIGHTS=stacked_qkv("c_attn"), RELATIONS=(*ATTENTION_RELATIONS[:-1], _fused_qkv, _c_proj))

OpenAIGPTMLP = host("OpenAIGPTMLP", GPT2MLP, values=[
    Value("mlp_activation", Neurons, "The activation function's output, act(c_fc(input)) (act a function: read where "
          "it is called)", op("self_act_0")),
])

ENVOYS = {hf.Block: OpenAIGPTBlock, hf.Attention: OpenAIGPTAttention, hf.MLP: OpenAIGPTMLP}
# OpenAIGPTConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("OpenAIGPTStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, FINAL_NORM=False,
            family_module=sys.modules[__name__])

build = text_only(hf.OpenAIGPTLMHeadModel)
layer_types = attention_layer_types  # OpenAIGPTConfig has no layer_types: full attention on every block
prepare = nothing_to_prepare


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "embed_positions", "layers", "lm_head", "layers.0.self_attn", "layers.0.self_attn.c_attn",
            "layers.0.self_attn.c_proj", "layers.0.ln_1", "layers.0.mlp", "layers.0.mlp.c_fc", "layers.0.mlp.c_proj",
            "layers.0.ln_2"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": 4 * model.text_config.hidden_size}  # GPT-1's MLP is always 4 · n_embd wide
