"""The post-norm encoder block (BERT's, and RoBERTa's, ELECTRA's, XLM-R's): each sublayer's output is added to
the stream and the sum is normed, so the stream between the blocks is always a LayerNorm's output.

    mid  = LayerNorm_a(x + attention(x))          layer_mid is the sum; mlp_norm_output its norm
    out  = LayerNorm_m(mid_n + mlp(mid_n))        mid_n = mlp_norm_output = mlp_input; layer_output the norm

The names are OPT-350m's post-norm block's (`nncanon.families.opt`): ``layer_mid`` is the stream after the
attention add, before its norm; ``mlp_norm_output`` that norm, which the MLP reads and its output is added to;
no norm precedes the attention, so ``attention_norm_output`` does not exist. BERT's MLP has no module of its
own (``intermediate`` is the up projection and its activation, ``output`` the down projection and the second
norm), so its values are the block's, as OPT's are: ``layers[i].mlp_output``.

The modules are reached by their native paths: ``attention.output.LayerNorm`` (nnsight serves a child named
``output`` as ``E_output``), ``intermediate``, ``output.dense``, ``output.LayerNorm``.
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import Neurons, Residual
from ...core.locators import child, own
from ...core.relations import first, relation
from ...core.values import Value, never
from ..blocks.norms import formula, layer_norm

_FORM = formula("· weight + bias")
_MID = ("layer_input", "self_attn.attention_output", "layer_mid")


@relation("layer_input + self_attn.attention_output == layer_mid: the attention's add, before its norm",
          proves="layer_mid self_attn.attention_output", reads="layer_input self_attn.attention_output layer_mid",
          adds=_MID)
def _attention_add(host, r):
    return [(r["layer_input"] + r["self_attn.attention_output"], r["layer_mid"])]


@relation("what self_attn is called with == layer_input: no norm before the attention (post-norm)",
          proves="layer_input", reads="layer_input self_attn.input")
def _attention_reads_the_stream(host, r):
    return [(first(r["self_attn.input"]), r["layer_input"])]


def post_norms(first, second, mlp_output: str = "mlp_output"):
    """The relation of the two LayerNorms after the adds: ``first(module)`` norms layer_mid, ``second(module)`` the MLP's
    add (``mlp_output``: the value the MLP adds, the block's own or ``mlp.mlp_output`` where the MLP is a module of its
    own, as GPT-1's)."""

    @relation(f"mlp_input == mlp_norm_output == layernorm(layer_mid); layer_output == layernorm(mlp_input + "
              f"{mlp_output}): post-norm, each LayerNorm after its add, layernorm(x) = {_FORM}",
              proves=f"mlp_norm_output mlp_input layer_output {mlp_output}",
              reads=f"layer_mid mlp_norm_output mlp_input {mlp_output} layer_output",
              adds=("mlp_input", mlp_output, "layer_output"))
    def _post_norms(host, r):
        module = host._module
        return [(layer_norm(first(module), r["layer_mid"]), r["mlp_norm_output"]),
                (r["mlp_norm_output"], r["mlp_input"]),
                (layer_norm(second(module), r["mlp_input"] + r[mlp_output]), r["layer_output"])]

    return _post_norms


_post_norms = post_norms(lambda module: module.attention.output.LayerNorm, lambda module: module.output.LayerNorm)


@relation("mlp_activation == act(intermediate.dense(mlp_input)); mlp_neurons == mlp_activation (no gate); "
          "mlp_output == output.dense(mlp_neurons)", proves="mlp_activation mlp_neurons",
          reads="mlp_input mlp_activation mlp_neurons mlp_output")
def _mlp(host, r):
    module = host._module
    up = module.intermediate
    return [(up.intermediate_act_fn(up.dense(r["mlp_input"])), r["mlp_activation"]),
            (r["mlp_activation"], r["mlp_neurons"]), (module.output.dense(r["mlp_neurons"]), r["mlp_output"])]


#: the attention's add and its unnormed input: every post-norm block's, whatever its norms are called (GPT-1's,
#: BART's stacks too)
STREAM_RELATIONS = (_attention_add, _attention_reads_the_stream)
POST_NORM_RELATIONS = (*STREAM_RELATIONS, _post_norms, _mlp)

PostNormBlock = host("PostNormBlock", values=[
    Value("layer_input", Residual, "The residual stream entering the block (a LayerNorm's output)", own("input")),
    Value("attention_norm_output", Residual, "The normed stream entering the attention", child("self_attn", "input"),
          conditions=(never("the block is post-norm: the attention reads layer_input itself, and the LayerNorm "
                            "comes after the add (mlp_norm_output)"),)),
    Value("layer_mid", Residual, "The residual stream after the attention add, before its LayerNorm",
          child("self_attn.E_output.LayerNorm", "input", shown="self_attn.output.LayerNorm")),
    Value("mlp_norm_output", Residual, "The attention add's LayerNorm: the stream the MLP reads and its output is "
          "added to", child("self_attn.E_output.LayerNorm", shown="self_attn.output.LayerNorm")),
    # intermediate's input is also the residual output.dense's output is added to: an assignment writes into it
    Value("mlp_input", Residual, "What the MLP's up projection (intermediate) is called with, and the residual its "
          "output is added to", child("intermediate", "input"), assign_in_place=True),
    Value("mlp_activation", Neurons, "The activation's output, act(intermediate.dense(mlp_input))",
          child("intermediate")),
    Value("mlp_neurons", Neurons, "What the down projection output.dense receives: the activation itself (no gate)",
          child("E_output.dense", "input", shown="output.dense")),
    Value("mlp_output", Residual, "What the MLP adds to the stream before the block's last LayerNorm: output.dense's "
          "output", child("E_output.dense", shown="output.dense")),
    Value("layer_output", Residual, "The residual stream leaving the block: the LayerNorm of mlp_input + mlp_output",
          own("output")),
], HOST="model.layers[i]", KIND="block", RELATIONS=POST_NORM_RELATIONS, MIXERS=("self_attn",))
