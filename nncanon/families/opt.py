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
``[batch, seq, ...]``, views, so edits land.

OPT-350m alone has another layout, which the config picks (``layout_envoys``, ``layout_root``): the block is
post-norm (``do_layer_norm_before`` false): ``layer_mid = layer_input + attention(layer_input)`` is normed by
``self_attn_layer_norm`` (``input_layernorm``) into what fc1 reads and what the MLP's output is added to, and that
sum is normed by ``final_layer_norm`` (``post_attention_layernorm``) into ``layer_output``; no norm precedes the
attention (``attention_norm_output`` does not exist). The embedding is narrower than the stream
(``word_embed_proj_dim``): ``project_in`` widens ``token_embeddings`` into ``projected_embeddings`` before the
positions are added, there is no final norm, and ``project_out`` narrows the last block's output into
``head_input``, what the tied head reads (the lens applies it: ``before_the_head``).

The attention is multi-head with separate ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` (mounted as
``o_proj``), all with biases (``enable_bias``). OPT scales the queries, not the scores: ``attention_queries`` is
``q_proj(x) · head_dim^-0.5``, and the attention function is called with scaling 1. The head is tied to the
token embedding; the final norm is ``model.decoder.final_layer_norm`` (``norm``).
"""

from __future__ import annotations

import sys

from transformers.models.opt import modeling_opt as hf

from ..core.hosts import host
from ..core.layouts import Neurons, Residual, layout
from ..core.locators import child
from ..core.model import StandardModel
from ..core.relations import first, pick, relation
from ..core.values import Value, never
from ..core.views import TOKENS
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import BLOCK_RELATIONS, ROOT_RELATIONS, Block, attention_layer_types, text_only
from ..parts.blocks.positions import learned_positions, root_relations, root_values
from ..research.weights import Layout

FAMILY = "opt"
MODEL_TYPES = ("opt",)
RENAME = {
    "model.decoder.embed_tokens": "embed_tokens",
    "model.decoder.embed_positions": "embed_positions",
    "model.decoder.layers": "layers",
    "model.decoder.final_layer_norm": "norm",
    "model.decoder.project_in": "project_in",
    "model.decoder.project_out": "project_out",
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


def block_mlp_values(view=TOKENS) -> list[Value]:
    """The values of an MLP whose fc1, activation_fn and fc2 are the block's own children (OPT's, on token-flattened
    rows: ``view`` TOKENS; BioGPT's, on ``[batch, seq, ...]``: None)."""
    def rows(name: str, layout, description: str, locator, **kw) -> Value:
        return Value(name, layout, description, locator, view=view, **kw)

    return [
        # the norm's input is also the residual fc2's output is added to: an assignment writes into it, as an edit does
        rows("layer_mid", Residual, "The residual stream after the attention add",
             child("post_attention_layernorm", "input"), assign_in_place=True),
        rows("mlp_norm_output", Residual, "The normed stream entering fc1", child("post_attention_layernorm")),
        rows("mlp_input", Residual, "What fc1 is called with", child("fc1", "input")),
        rows("mlp_activation", Neurons, "The activation function's output, activation_fn(fc1(mlp_input))",
             child("activation_fn")),
        rows("mlp_neurons", Neurons, "What fc2 receives: the activation itself (no gate)", child("fc2", "input")),
        rows("mlp_output", Residual, "What the MLP adds to the residual stream: fc2's output", child("fc2")),
    ]


#: the block's relations with the MLP's values on the block
BLOCK_MLP_RELATIONS = (pick(BLOCK_RELATIONS, "layer_input + {mixer}"), pick(BLOCK_RELATIONS, "attention_norm_output =="),
                       _mlp_add, _mlp_norm, _fc)

OPTBlock = host("OPTBlock", Block, values=block_mlp_values(), TRACKS_TOKENS=True, RELATIONS=BLOCK_MLP_RELATIONS)

# -- the attention: the queries scaled before the call -------------------------------------------------


def projections(scaled: bool = True):
    """The q, k, v projections' relation: ``scaled``, OPT's queries multiplied by head_dim^-0.5 before the call (whose
    scaling is 1); else BioGPT's, the call scaling the scores."""
    queries = ("attention_queries == q_proj(input) · head_dim^-0.5 in heads (OPT scales the queries; the attention "
               "call's scaling is 1)" if scaled else "attention_queries == q_proj(input) in heads")

    @relation(f"{queries}; attention_keys, attention_values (the call's last seq positions) == k_proj(input), "
              "v_proj(input) in heads", proves="attention_values",
              reads="input attention_queries attention_keys attention_values")
    def _projections(host, r):
        module = host._module
        x = first(r["input"])
        seq = x.shape[1]

        def in_heads(y):
            return y.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)

        return [(in_heads(module.q_proj(x) * (module.scaling if scaled else 1.0)), r["attention_queries"]),
                (in_heads(module.k_proj(x)), r["attention_keys"][:, :, -seq:]),
                (in_heads(module.v_proj(x)), r["attention_values"][:, :, -seq:])]

    return _projections


_projections = projections()


#: the queries arrive scaled, and the call multiplies the scores by 1
OPTAttention = host("OPTAttention", Attention, SCALING=staticmethod(lambda module: 1.0), WEIGHTS=Layout(query_scale="scaling"),
                    RELATIONS=(*ATTENTION_RELATIONS, _projections))

ENVOYS = {hf.OPTDecoderLayer: OPTBlock, hf.OPTAttention: OPTAttention}
# OPTConfig has no num_key_value_heads: StandardModel.num_kv_heads falls back to the heads (each has its own)
ROOT = host("OPTStandardModel", StandardModel, values=root_values("model.decoder.embed_positions"),
            RELATIONS=root_relations(offset=2), family_module=sys.modules[__name__])

build = text_only(hf.OPTForCausalLM)
layer_types = attention_layer_types  # OPTConfig has no layer_types: full attention on every block


# -- OPT-350m: the post-norm block, project_in / project_out, no final norm ----------------------------------


@relation("mlp_input == mlp_norm_output == input_layernorm(layer_mid); layer_output == "
          "post_attention_layernorm(mlp_input + mlp_output): post-norm, each norm after its add",
          proves="mlp_norm_output mlp_input layer_output mlp_output",
          reads="layer_mid mlp_norm_output mlp_input mlp_output layer_output")
def _post_norms(host, r):
    module = host._module
    return [(module.self_attn_layer_norm(r["layer_mid"]), r["mlp_norm_output"]), (r["mlp_norm_output"], r["mlp_input"]),
            (module.final_layer_norm(r["mlp_input"] + r["mlp_output"]), r["layer_output"])]


@relation("what self_attn is called with == layer_input: no norm before the attention (post-norm)",
          proves="layer_input", reads="layer_input self_attn.input")
def _attention_reads_the_stream(host, r):
    return [(first(r["self_attn.input"]), r["layer_input"])]


OPTPostNormBlock = host("OPTPostNormBlock", OPTBlock, values=[
    Value("attention_norm_output", Residual, "The normed stream entering the attention", child("input_layernorm"),
          conditions=(never("OPT-350m's block is post-norm (do_layer_norm_before false): the attention reads "
                            "layer_input itself, and input_layernorm norms layer_mid after the add"),)),
    Value("layer_mid", Residual, "The residual stream after the attention add, before input_layernorm norms it",
          child("input_layernorm", "input")),
    Value("mlp_norm_output", Residual, "input_layernorm(layer_mid): the normed stream fc1 reads and fc2's output is "
          "added to", child("input_layernorm")),
    # fc1's input is also the residual fc2's output is added to: an assignment writes into it, as an edit does
    _rows("mlp_input", Residual, "What fc1 is called with, and the residual its MLP's output is added to",
          child("fc1", "input"), assign_in_place=True),
], RELATIONS=(pick(BLOCK_RELATIONS, "layer_input + {mixer}"), _attention_reads_the_stream, _post_norms, _fc))

#: the token embedding's width on OPT-350m (word_embed_proj_dim, 512 of 1024), narrower than the stream
Embeddings = layout("Embeddings", "batch seq word_embed_proj_dim")
_NO_NORM = never("OPT-350m has no final norm (do_layer_norm_before false: each block ends in its own norm)")


@relation("layers[0].layer_input == projected_embeddings + position_embeddings; projected_embeddings == "
          "project_in(token_embeddings)", proves="projected_embeddings",
          reads="token_embeddings projected_embeddings position_embeddings layers[0].layer_input")
def _project_in(host, r):
    project_in = host._module.get_decoder().project_in
    return [(project_in(r["token_embeddings"]), r["projected_embeddings"]),
            (r["projected_embeddings"] + r["position_embeddings"], r["layers[0].layer_input"])]


@relation("head_input == project_out(layers[-1].layer_output) (no final norm); lm_head_output == lm_head(head_input)",
          proves="head_input lm_head_output", reads="layers[-1].layer_output head_input lm_head_output")
def _project_out(host, r):
    module = host._module
    return [(module.get_decoder().project_out(r["layers[-1].layer_output"]), r["head_input"]),
            (module.lm_head(r["head_input"]), r["lm_head_output"])]


def _positions_of_projected():
    """The learned-positions relation with the projected embeddings in the token embeddings' place in the sum."""
    positions = learned_positions(offset=2)

    @relation(positions.text.replace("layers[0].layer_input == token_embeddings + position_embeddings; ", ""),
              proves=" ".join(positions.proves), reads="input_ids attention_mask token_embeddings position_embeddings "
                                                        "projected_embeddings layers[0].layer_input")
    def check(host, r):
        # the shared check with the projected embeddings in the sum (_project_in proves them); the token rows here
        total, _, rows = positions.compute(host, {**r, "token_embeddings": r["projected_embeddings"]})
        return [total, (host.embed_tokens._module.weight[r["input_ids"]], r["token_embeddings"]), rows]

    return check


_VALUES_350M = [v if v.name not in ("token_embeddings", "final_norm_output") else
                Value(v.name, Embeddings, "The embedding module's output, word_embed_proj_dim wide; project_in widens it",
                      child("embed_tokens")) if v.name == "token_embeddings" else
                Value(v.name, Residual, v.description, child("norm"), conditions=(_NO_NORM,))
                for v in root_values("model.decoder.embed_positions")]
_VALUES_350M.insert(3, Value("projected_embeddings", Residual, "project_in(token_embeddings): the token embeddings "
                             "widened to the stream, before the positions are added", child("project_in")))
_VALUES_350M.append(Value("head_input", Embeddings, "project_out(layers[-1].layer_output): what the tied head reads",
                          child("project_out")))

OPT350mStandardModel = host("OPT350mStandardModel", StandardModel, values=_VALUES_350M, FINAL_NORM=False,
                            RELATIONS=(*(rel for rel in ROOT_RELATIONS if not rel.text.startswith(
                                ("layers[0].layer_input ==", "final_norm_output ==", "lm_head_output =="))),
                                       _project_in, _positions_of_projected(), _project_out),
                            family_module=sys.modules[__name__])


def layout_envoys(config) -> dict:
    """The post-norm block's host on OPT-350m (``do_layer_norm_before`` false), over ``ENVOYS``."""
    return {} if config.do_layer_norm_before else {hf.OPTDecoderLayer: OPTPostNormBlock}


def layout_root(config):
    """OPT-350m's root (projected embeddings, no final norm) when the embedding is narrower than the stream."""
    return ROOT if config.word_embed_proj_dim == config.hidden_size and config.do_layer_norm_before \
        else OPT350mStandardModel


def before_the_head(model: StandardModel, normed):
    """``project_out`` between the last block and the head, where the model has one (OPT-350m); else nothing."""
    project_out = model._module.get_decoder().project_out
    return normed if project_out is None else model.project_out(normed)


def prepare(model: StandardModel) -> None:
    """Nothing to change: both layouts OPTConfig selects are served (``layout_envoys``, ``layout_root``)."""


def required_paths(model: StandardModel) -> list[str]:
    # 350m has no final norm, and project_in / project_out
    config = model.text_config
    norm = ["norm"] if config.do_layer_norm_before else []
    norm += ["project_in", "project_out"] if config.word_embed_proj_dim != config.hidden_size else []
    return ["embed_tokens", "embed_positions", "layers", *norm, "lm_head", "layers.0.input_layernorm",
            "layers.0.self_attn", "layers.0.self_attn.q_proj", "layers.0.self_attn.o_proj",
            "layers.0.post_attention_layernorm", "layers.0.fc1", "layers.0.activation_fn", "layers.0.fc2"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.ffn_dim, "word_embed_proj_dim": model.text_config.word_embed_proj_dim}
