"""OPT (OPTForCausalLM, model_type opt): learned positions offset by two rows, and an MLP with no module of its own.

The stream entering the first block is the token embedding plus a learned position embedding
(``model.decoder.embed_positions``, mounted as ``embed_positions``), whose table starts two rows in: position p
reads row p + 2 (``OPTLearnedPositionalEmbedding.offset``, a leftover of fairseq's padding rows; rows 0 and 1
are read only by padding). OPT numbers each row's real tokens from 0 itself (``cumsum(attention_mask) - 1``),
so a left-padded row's first real token is at position 0.

The block is pre-norm on every released size but 350m (``do_layer_norm_before``): ``self_attn_layer_norm``
(mounted as ``input_layernorm``) -> attention -> add, ``final_layer_norm`` (``post_attention_layernorm``) ->
fc1 -> ReLU -> fc2 -> add. There is no MLP module: ``fc1``, ``activation_fn`` and ``fc2`` are the block's own
children, so the MLP's values are the block's (``layers[i].mlp_output``, not ``layers[i].mlp.mlp_output``).
The block runs its MLP half on token-flattened rows (``[batch · seq, hidden]``); the values show them as
``[batch, seq, ...]``, views, so edits land. The family refuses the post-norm block (350m) and the projected
embedding (``word_embed_proj_dim`` != ``hidden_size``, 350m's ``project_in`` / ``project_out``): the values and
relations here are the pre-norm block's.

The attention is multi-head with separate ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` (mounted as
``o_proj``), all with biases (``enable_bias``). OPT scales the queries, not the scores: ``attention_queries`` is
``q_proj(x) · head_dim^-0.5``, and the attention function is called with scaling 1. The head is tied to the
token embedding; the final norm is ``model.decoder.final_layer_norm`` (``norm``).
"""

from __future__ import annotations

import sys

from transformers.models.opt import modeling_opt as hf

from ..hosts import host
from ..layouts import Neurons, Residual
from ..locators import child
from ..model import FamilyMismatch, StandardModel
from ..parts.attention import ATTENTION_RELATIONS, Attention
from ..parts.decoder import BLOCK_RELATIONS, Block, attention_layer_types, text_only
from ..parts.positions import root_relations, root_values
from ..relations import first, pick, relation
from ..values import Value
from ..views import TOKENS
from ..weights import Layout

FAMILY = "opt"
MODEL_TYPES = ("opt",)
RENAME = {
    "model.decoder.embed_tokens": "embed_tokens",
    "model.decoder.embed_positions": "embed_positions",
    "model.decoder.layers": "layers",
    "model.decoder.final_layer_norm": "norm",
    "self_attn_layer_norm": "input_layernorm",
    "final_layer_norm": "post_attention_layernorm",  # in a block (the decoder's own is mounted as norm)
    "out_proj": "o_proj",
}

# -- the block: the MLP's values are the block's, on token-flattened rows ----------------------------


@relation("layer_mid + mlp_output == layer_output", proves="layer_output mlp_output",
          reads="layer_mid mlp_output layer_output", adds=("layer_mid", "mlp_output", "layer_output"))
def _mlp_add(host, r):
    return [(r["layer_mid"] + r["mlp_output"], r["layer_output"])]


@relation("mlp_input == mlp_norm_output == post_attention_layernorm(layer_mid)", proves="mlp_norm_output mlp_input",
          reads="layer_mid mlp_norm_output mlp_input")
def _mlp_norm(host, r):
    return [(host.post_attention_layernorm._module(r["layer_mid"]), r["mlp_norm_output"]),
            (r["mlp_norm_output"], r["mlp_input"])]


@relation("mlp_activation == activation_fn(fc1(mlp_input)); mlp_neurons == mlp_activation (no gate); "
          "mlp_output == fc2(mlp_neurons)", proves="mlp_activation mlp_neurons",
          reads="mlp_input mlp_activation mlp_neurons mlp_output")
def _fc(host, r):
    module = host._module
    activation = module.activation_fn(module.fc1(r["mlp_input"]))
    return [(activation, r["mlp_activation"]), (r["mlp_activation"], r["mlp_neurons"]),
            (module.fc2(r["mlp_neurons"]), r["mlp_output"])]


def _rows(name: str, layout, description: str, locator, **kw) -> Value:
    return Value(name, layout, description, locator, view=TOKENS, **kw)


OPTBlock = host("OPTBlock", Block, values=[
    # the norm's input is also the residual fc2's output is added to: an assignment writes into it, as an edit does
    _rows("layer_mid", Residual, "The residual stream after the attention add",
          child("post_attention_layernorm", "input"), assign_in_place=True),
    _rows("mlp_norm_output", Residual, "The normed stream entering fc1", child("post_attention_layernorm")),
    _rows("mlp_input", Residual, "What fc1 is called with", child("fc1", "input")),
    _rows("mlp_activation", Neurons, "The activation function's output, activation_fn(fc1(mlp_input))",
          child("activation_fn")),
    _rows("mlp_neurons", Neurons, "What fc2 receives: the activation itself (no gate)", child("fc2", "input")),
    _rows("mlp_output", Residual, "What the MLP adds to the residual stream: fc2's output", child("fc2")),
], TRACKS_TOKENS=True, RELATIONS=(pick(BLOCK_RELATIONS, "layer_input + {mixer}"),
                                  pick(BLOCK_RELATIONS, "attention_norm_output =="), _mlp_add, _mlp_norm, _fc))

# -- the attention: the queries scaled before the call -------------------------------------------------


@relation("attention_queries == q_proj(input) · head_dim^-0.5 in heads (OPT scales the queries; the attention call's "
          "scaling is 1); attention_keys, attention_values (the call's last seq positions) == k_proj(input), "
          "v_proj(input) in heads", proves="attention_values", reads="input attention_queries attention_keys attention_values")
def _projections(host, r):
    module = host._module
    x = first(r["input"])
    seq = x.shape[1]

    def in_heads(y):
        return y.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)

    return [(in_heads(module.q_proj(x) * module.scaling), r["attention_queries"]),
            (in_heads(module.k_proj(x)), r["attention_keys"][:, :, -seq:]),
            (in_heads(module.v_proj(x)), r["attention_values"][:, :, -seq:])]


#: the queries arrive scaled, and the call multiplies the scores by 1
OPTAttention = host("OPTAttention", Attention, SCALING=staticmethod(lambda module: 1.0), WEIGHTS=Layout(query_scale="scaling"),
                    RELATIONS=(*ATTENTION_RELATIONS, _projections))

ENVOYS = {hf.OPTDecoderLayer: OPTBlock, hf.OPTAttention: OPTAttention}
# OPTConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("OPTStandardModel", StandardModel, values=root_values("model.decoder.embed_positions"),
            RELATIONS=root_relations(offset=2), family_module=sys.modules[__name__])

build = text_only(hf.OPTForCausalLM)
layer_types = attention_layer_types  # OPTConfig has no layer_types: full attention on every block


def prepare(model: StandardModel) -> None:
    """Refuse 350m's layout (post-norm, projected embeddings): the values and relations here are the pre-norm
    block's, with the embedding as wide as the stream. The user's config is left as it was given."""
    config = model.text_config
    if not config.do_layer_norm_before or config.word_embed_proj_dim != config.hidden_size:
        raise FamilyMismatch(f"{FAMILY}: do_layer_norm_before false or word_embed_proj_dim != hidden_size (opt-350m's "
                             "post-norm block and project_in / project_out); nncanon serves OPT's pre-norm layout, "
                             "which every other released size has")


def required_paths(model: StandardModel) -> list[str]:
    # 350m has no final norm: leave it to prepare, which names the layout, instead of a missing path
    norm = ["norm"] if model.text_config.do_layer_norm_before else []
    return ["embed_tokens", "embed_positions", "layers", *norm, "lm_head", "layers.0.input_layernorm",
            "layers.0.self_attn", "layers.0.self_attn.q_proj", "layers.0.self_attn.o_proj",
            "layers.0.post_attention_layernorm", "layers.0.fc1", "layers.0.activation_fn", "layers.0.fc2"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.ffn_dim}
