"""GPT-2 (GPT2LMHeadModel, model_type gpt2): learned absolute positions, Conv1D projections, LayerNorm.

Every block is LayerNorm -> attention -> add, LayerNorm -> MLP -> add, and returns a tensor, as
Llama's does; what differs is around and inside it. The stream entering the first block is the token
embedding plus a learned position embedding (``transformer.wpe``, mounted as ``embed_positions``):
``position_embeddings`` is a root value of its own, and ``layers[0].layer_input`` is the sum. The
positions are ``0 .. seq-1`` on every row, padded or not (GPT2Model numbers them from the first
column unless ``position_ids`` is passed), so a left-padded row's real tokens sit at other positions
than the same prompt alone. Every projection is a ``Conv1D``, a linear layer whose weight is stored
transposed, ``[in, out]``: ``y = x @ weight + bias``. The attention's queries, keys and values come
from one fused projection, ``c_attn`` (``3 · n_embd`` wide), split in three in the forward: they are
read where the attention function is called, already split into heads; there is no rotary embedding,
and every head has its own key and value (no grouping). The attention's output projection is
``c_proj``. The MLP is not gated: ``c_proj(act(c_fc(x)))``, GELU with the tanh approximation
(``gelu_new``), so ``mlp_neurons`` is the activation itself. The norms are LayerNorms with a bias, and
``lm_head`` shares its weight with the token embedding.

Native names (``transformer.wte``, ``wpe``, ``h[i]`` with ``ln_1``, ``attn``, ``ln_2``, ``mlp``,
``transformer.ln_f``) are mounted on the standard ones (``embed_tokens``, ``embed_positions``,
``layers[i]`` with ``input_layernorm``, ``self_attn``, ``post_attention_layernorm``, ``mlp``,
``norm``); the modules inside the attention and the MLP keep GPT-2's names.
"""

from __future__ import annotations

import sys

from transformers.models.gpt2 import modeling_gpt2 as hf

from ..core.hosts import host
from ..core.layouts import HeadOutputs, Neurons, Residual
from ..core.locators import child, own
from ..core.model import StandardModel
from ..core.relations import first, relation, rows
from ..core.values import Value
from ..core.views import heads
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention, head_results_value
from ..parts.blocks.decoder import Block, attention_layer_types, nothing_to_prepare, text_only
from ..parts.blocks.positions import root_relations, root_values
from ..parts.blocks.ungated import n_inner_sizes
from ..research.weights import MLP as MLP_WEIGHTS
from ..research.weights import Layout, stacked_qkv

FAMILY = "gpt2"
MODEL_TYPES = ("gpt2",)
RENAME = {
    "transformer.wte": "embed_tokens",
    "transformer.wpe": "embed_positions",
    "transformer.h": "layers",
    "transformer.ln_f": "norm",
    "ln_1": "input_layernorm",
    "ln_2": "post_attention_layernorm",
    "attn": "self_attn",
}

# -- the root: token plus learned position embeddings ----------------------------------------------

ROOT_RELATIONS_GPT2 = root_relations()
GPT2_ROOT_VALUES = root_values("transformer.wpe")

# -- attention: one fused Conv1D for q, k, v; c_proj out ---------------------------------------------


@relation("attention_output == c_proj(attention_premix), c_proj(x) = x @ c_proj.weight + c_proj.bias "
          "(a Conv1D, weight [in, out])", proves="attention_premix attention_output",
          reads="attention_premix attention_output")
def _c_proj(host, r):
    premix = r["attention_premix"]
    proj = host.c_proj._module
    flat = premix.reshape(*premix.shape[:2], -1)
    return [(flat.double() @ proj.weight.double() + proj.bias.double(), r["attention_output"])]


@relation("attention_queries, attention_keys, attention_values == c_attn(input) split in three along the "
          "features, then into heads; c_attn(x) = x @ c_attn.weight + c_attn.bias (weight [n_embd, 3·n_embd])",
          proves="attention_queries attention_keys attention_values",
          reads="input attention_queries attention_keys attention_values")
def _fused_qkv(host, r):
    module = host._module
    x = first(r["input"]).double()
    fused = x @ module.c_attn.weight.double() + module.c_attn.bias.double()
    split = fused.split(module.split_size, dim=-1)
    # the text model's heads, not the module's head width: GPT-1's Attention (which shares this) holds none
    as_heads = [s.unflatten(-1, (host._std_model.num_heads, -1)).transpose(1, 2) for s in split]
    return [(as_heads[0], r["attention_queries"]), (as_heads[1], r["attention_keys"]),
            (as_heads[2], r["attention_values"])]


assert ATTENTION_RELATIONS[-1].text == "attention_output == o_proj(attention_premix)"
GPT2_ATTENTION_RELATIONS = (*ATTENTION_RELATIONS[:-1], _fused_qkv, _c_proj)

GPT2Attention = host("GPT2Attention", Attention, WEIGHTS=stacked_qkv("c_attn"), values=[
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection c_proj takes it",
          child("c_proj", "input"), view=heads()),
    head_results_value("c_proj"),
], RELATIONS=GPT2_ATTENTION_RELATIONS)

# -- the MLP: c_fc -> act -> c_proj, not gated -------------------------------------------------------


@relation("mlp_output == c_proj(mlp_neurons), c_proj(x) = x @ c_proj.weight + c_proj.bias (a Conv1D)",
          proves="mlp_neurons mlp_output", reads="mlp_neurons mlp_output")
def _mlp_down(host, r):
    proj = host.c_proj._module
    return [(r["mlp_neurons"].double() @ proj.weight.double() + proj.bias.double(), r["mlp_output"])]


@relation("mlp_activation == act(c_fc(input)); mlp_neurons == mlp_activation (not gated)",
          proves="mlp_activation", reads="input mlp_activation mlp_neurons")
def _not_gated(host, r):
    module, x = host._module, rows(first(r["input"]))
    # c_fc itself (Conv1D: one addmm), not x @ weight + bias: a separate add rounds as each CPU's BLAS picks,
    # and the page's "0" must hold on every CPU
    activation = module.act(module.c_fc(x))
    return [(activation, rows(r["mlp_activation"])), (r["mlp_activation"], r["mlp_neurons"])]


GPT2MLP = host("GPT2MLP", values=[
    Value("mlp_activation", Neurons, "The activation function's output, act(c_fc(input))", child("act")),
    Value("mlp_neurons", Neurons, "What the down projection c_proj receives: on GPT-2 the activation itself",
          child("c_proj", "input")),
    Value("mlp_output", Residual, "What the MLP adds to the residual stream", own("output")),
], HOST="model.layers[i].mlp", KIND="dense MLP", RELATIONS=(_mlp_down, _not_gated),
   WEIGHTS=Layout(w_out="c_proj"), **MLP_WEIGHTS)

ENVOYS = {hf.GPT2Block: Block, hf.GPT2Attention: GPT2Attention, hf.GPT2MLP: GPT2MLP}


class GPT2StandardModel(host("GPT2StandardModel", StandardModel, values=GPT2_ROOT_VALUES,
                             RELATIONS=ROOT_RELATIONS_GPT2, family_module=sys.modules[__name__])):
    @property
    def num_kv_heads(self) -> int:
        """Every head has its own key and value: GPT2Config has no num_key_value_heads."""
        return self.text_config.num_attention_heads


ROOT = GPT2StandardModel

build = text_only(hf.GPT2LMHeadModel)
layer_types = attention_layer_types  # GPT2Config has no layer_types: full attention on every block
prepare = nothing_to_prepare
dim_sizes = n_inner_sizes  # the MLP is n_inner wide, or 4 · hidden_size


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "embed_positions", "layers", "norm", "lm_head", "layers.0.input_layernorm",
            "layers.0.self_attn", "layers.0.self_attn.c_attn", "layers.0.self_attn.c_proj",
            "layers.0.post_attention_layernorm", "layers.0.mlp", "layers.0.mlp.c_fc", "layers.0.mlp.act",
            "layers.0.mlp.c_proj"]
