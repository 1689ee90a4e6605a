"""Granite's mixture and its shared expert: a softmax over the router's top-k logits weighting fused SwiGLU experts
(``block_sparse_moe``, served as ``mlp``), and beside it on the block a dense SwiGLU MLP every token goes through
(``shared_mlp``, served as ``shared_experts``), its gate and up projections one fused ``input_linear``.

The block, not the mixture, calls the shared expert: both read the post-attention norm's output, and the block adds
``residual_multiplier`` times the sum of their outputs. Granite 4.0-H (granitemoehybrid), GraniteMoeShared
(granitemoeshared) and the mixture alone (granitemoe: ``GraniteMoE`` without the block) share these hosts.
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import Neurons, Residual
from ...core.locators import child, own
from ...core.relations import first, relation, rows
from ...core.values import Value
from .decoder import BLOCK_RELATIONS
from .mixture import MoE, MoEBlock, _routed_is_all, _slots, routing

#: the router takes the top-k logits and softmaxes them: the top-k of the softmax, renormalised
GraniteMoE = host("GraniteMoE", MoE, values=[
    Value("mlp_output", Residual, "The routed experts' combined output; the block adds residual_multiplier times "
          "its sum with shared_experts.mlp_output", own("output")),
], RELATIONS=(routing(True), _slots, _routed_is_all))


@relation("mlp_activation == act(input_linear(input)'s first half); mlp_neurons == mlp_activation · its second "
          "half; mlp_output == output_linear(mlp_neurons)", proves="mlp_activation mlp_neurons mlp_output",
          reads="input mlp_activation mlp_neurons mlp_output")
def _fused_gate_up(host, r):
    module, x = host._module, rows(first(r["input"]))
    gate, up = module.input_linear(x).chunk(2, dim=-1)
    activation = module.activation(gate)
    neurons = activation * up
    return [(activation, rows(r["mlp_activation"])), (neurons, rows(r["mlp_neurons"])),
            (module.output_linear(neurons), rows(r["mlp_output"]))]


SharedExpert = host("SharedExpert", values=[
    Value("mlp_activation", Neurons, "The activation function's output: act of input_linear's first half (the gate)",
          child("activation")),
    Value("mlp_neurons", Neurons, "What output_linear receives: the activation times input_linear's second half "
          "(the up projection)", child("output_linear", "input")),
    Value("mlp_output", Residual, "The shared expert's output (output_linear's); the block adds residual_multiplier "
          "times its sum with mlp.mlp_output", own("output")),
], HOST="model.layers[i].shared_experts", KIND="shared expert MLP", RELATIONS=(_fused_gate_up,))

# -- the block: the residual multiplier on both branches; the MLP branch is the mixture plus the shared expert --


@relation("layer_input + residual_multiplier · {mixer}.attention_output == layer_mid",
          proves="layer_mid {mixer}.attention_output", reads="layer_input {mixer}.attention_output layer_mid",
          adds=("layer_input", "{mixer}.attention_output", "layer_mid"))
def _mixer_add(host, r):
    return [(r["layer_input"] + host._module.residual_multiplier * r["{mixer}.attention_output"], r["layer_mid"])]


@relation("layer_mid + residual_multiplier · (mlp.mlp_output + shared_experts.mlp_output) == layer_output",
          proves="layer_output mlp.mlp_output shared_experts.mlp_output",
          reads="layer_mid mlp.mlp_output shared_experts.mlp_output layer_output",
          adds=("layer_mid", "mlp.mlp_output", "layer_output"))
def _mlp_add(host, r):
    both = r["mlp.mlp_output"] + r["shared_experts.mlp_output"]
    return [(r["layer_mid"] + host._module.residual_multiplier * both, r["layer_output"])]


@relation("shared_experts is called with mlp_norm_output, as mlp is", proves="shared_experts.input",
          reads="mlp_norm_output shared_experts.input")
def _shared_input(host, r):
    return [(r["mlp_norm_output"], first(r["shared_experts.input"]))]


_KEPT = tuple(r for r in BLOCK_RELATIONS if " == layer_mid" not in r.text and " == layer_output" not in r.text)

#: a Granite block whose MLP branch is the mixture plus the shared expert (a family names its mixers: MIXERS)
GraniteSharedExpertBlock = host("GraniteSharedExpertBlock", MoEBlock, values=[
    # the mixture and the shared expert read one tensor: an assignment lands in it in place, so an edit reaches
    # both, as an in-place edit does
    Value("mlp_input", Residual, "What the mixture (mlp) and the shared expert (shared_experts) are both called "
          "with: an edit reaches both", child("mlp", "input"), assign_in_place=True),
], RELATIONS=(_mixer_add, _mlp_add, _shared_input, *_KEPT))
