"""Per-layer input embeddings (Gemma 4's PLE, ``hidden_size_per_layer_input``): besides the token embedding,
the model computes for every token one small vector per block, and each block adds a gated projection of its
vector to the stream after its MLP.

The model computes them once (Gemma4TextModel.get_per_layer_inputs, project_per_layer_inputs): a second
embedding table ``embed_tokens_per_layer`` (num_hidden_layers · hidden_size_per_layer_input wide, scaled by
``sqrt(hidden_size_per_layer_input)``) looked up at ``input_ids``, and ``per_layer_model_projection`` of the
token embeddings scaled by ``hidden_size ** -0.5`` and RMS-normed per block by ``per_layer_projection_norm``;
their sum times ``2 ** -0.5``, split into one slice per block, is what block i is called with
(``per_layer_input``). The block then adds, after the MLP's add, ``post_per_layer_input_norm(
per_layer_projection(act(per_layer_input_gate(stream)) · per_layer_input))``.

Every Gemma 4 RMSNorm multiplies by ``weight`` (not Gemma 2's ``1 + weight``); a norm built without a scale
(``with_scale=False``) multiplies by nothing.
"""

from __future__ import annotations

from ...core.layouts import Residual, layout
from ...core.locators import child, own
from ...core.relations import relation
from ...core.values import Value
from ...research.norm_forms import norm_epsilon

#: one block's per-layer input
PerLayerInput = layout("PerLayerInput", "batch seq hidden_size_per_layer_input")


def rms(norm, x):
    """A Gemma 4 RMSNorm in float64: ``x / sqrt(mean(x²) + eps) · weight`` (no weight: unscaled)."""
    x = x.double()
    # the epsilon wherever the release keeps it (5.25 renamed Gemma4RMSNorm.eps to variance_epsilon)
    out = x * (x.pow(2).mean(-1, keepdim=True) + norm_epsilon(norm)) ** -0.5
    return out * norm.weight.double() if getattr(norm, "with_scale", True) else out


#: the block's values: its slice of the per-layer inputs, the stream the branch reads, what the branch adds
PER_LAYER_VALUES = [
    Value("per_layer_input", PerLayerInput, "This block's per-layer input embedding, as the block is called with it",
          own("input", element=1)),
    Value("per_layer_stream", Residual,
          "The residual stream after the MLP add, which the per-layer input branch reads",
          child("per_layer_input_gate", "input"), assign_in_place=True),  # also the residual the branch is added to
    Value("per_layer_output", Residual,
          "What the per-layer input branch adds to the stream: post_per_layer_input_norm's output",
          child("post_per_layer_input_norm")),
]


@relation("per_layer_output == rms(per_layer_projection(act(per_layer_input_gate(per_layer_stream)) · "
          "per_layer_input)) · post_per_layer_input_norm.weight",
          proves="per_layer_output per_layer_input per_layer_stream",
          reads="per_layer_stream per_layer_input per_layer_output")
def _branch(host, r):
    module = host._module
    gate = module.act_fn(module.per_layer_input_gate(r["per_layer_stream"]))
    projected = module.per_layer_projection(gate * r["per_layer_input"])
    return [(rms(module.post_per_layer_input_norm, projected), r["per_layer_output"])]


def per_layer_inputs(model, input_ids, token_embeddings):
    """Every block's per-layer input ``[batch, seq, num_hidden_layers, hidden_size_per_layer_input]`` recomputed
    in float64 from the two tables and the norm's weight (not by the model's own get/project methods)."""
    text = model._module.model
    config = model.text_config
    blocks, width = config.num_hidden_layers, config.hidden_size_per_layer_input
    table = text.embed_tokens_per_layer.weight.double()[input_ids] * width ** 0.5
    table = table.unflatten(-1, (blocks, width))
    projected = token_embeddings.double() @ text.per_layer_model_projection.weight.double().T
    projected = (projected * config.hidden_size ** -0.5).unflatten(-1, (blocks, width))
    return (rms(text.per_layer_projection_norm, projected) + table) * 2 ** -0.5


@relation("layers[i].per_layer_input == (rms(per_layer_model_projection(token_embeddings) · hidden_size^-0.5)[i] · "
          "per_layer_projection_norm.weight + embed_tokens_per_layer.weight[input_ids][i] · "
          "sqrt(hidden_size_per_layer_input)) · 2^-0.5, [i] the block's slice of hidden_size_per_layer_input",
          proves="layers[*].per_layer_input", reads="input_ids token_embeddings layers[*].per_layer_input")
def _per_layer_inputs(host, r):
    expected = per_layer_inputs(host, r["input_ids"], r["token_embeddings"])
    return [(expected[:, :, i], read) for i, read in enumerate(r["layers[*].per_layer_input"])]


BLOCK_RELATIONS = (_branch,)
ROOT_RELATIONS = (_per_layer_inputs,)

__all__ = ["PerLayerInput", "rms", "PER_LAYER_VALUES", "BLOCK_RELATIONS", "ROOT_RELATIONS", "per_layer_inputs"]
