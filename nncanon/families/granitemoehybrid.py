"""Granite 4.0-H (GraniteMoeHybridForCausalLM, model_type granitemoehybrid): Mamba-2 and attention blocks,
each with a mixture of experts beside a shared expert, and Granite's four µP multipliers.

Every block norms its input (``input_layernorm``) and runs one sequence mixer of two kinds,
``config.layer_types``: a Mamba-2 mixer ``mamba`` (``linear_attention``) on most blocks, grouped-query
attention ``self_attn`` (``full_attention``; no position encoding on the released checkpoints,
``position_embedding_type`` ``nope``) on a few. It adds ``residual_multiplier`` times the mixer's output
(``layer_mid``), norms that (``post_attention_layernorm``) and hands it to two MLPs side by side: the routed
mixture, native ``block_sparse_moe`` (served as ``mlp``: a softmax over the top-k router logits, fused
SwiGLU experts), and the shared expert, native ``shared_mlp`` (served as ``shared_experts``: a SwiGLU MLP whose
gate and up projections are one fused ``input_linear``, chunked in two); it adds ``residual_multiplier``
times their sum. As on granite, ``embedding_multiplier`` scales the embedding before the first block,
``attention_multiplier`` is the attention's softmax scale, and the logits are lm_head's divided by
``logits_scaling``. The Mamba-2 mixer is transformers' Mamba2Mixer with its config fields renamed;
`nncanon.parts.recurrent.ssd` serves it under the mamba2 family's names and layouts (``key_dim = mamba_d_state``,
``value_dim = mamba_d_head``). A config with no experts (``num_local_experts`` 0, the dense 4.0-H micro
sizes) is refused: this family covers the mixture checkpoints.
"""

from __future__ import annotations

import sys

from transformers.models.granitemoehybrid import modeling_granitemoehybrid as hf

from ..core.hosts import host
from ..core.layouts import Neurons, Residual
from ..core.locators import child, own
from ..core.model import FamilyMismatch, StandardModel
from ..core.relations import first, relation, rows
from ..core.values import Value
from ..parts.blocks.decoder import BLOCK_RELATIONS, text_only
from ..parts.blocks.mixture import MoE, MoEBlock, _routed_is_all, _slots, routing
from ..parts.recurrent import hybrid, ssd
from ..parts.recurrent.ssd import KERNELS, SSD  # noqa: F401 (the family API, shared)
from .granite import ROOT as GRANITE_ROOT
from .granite import GraniteAttention

FAMILY = "granitemoehybrid"
MODEL_TYPES = ("granitemoehybrid",)
RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.norm": "norm",
          "block_sparse_moe": "mlp", "shared_mlp": "shared_experts"}
KERNEL_LIBRARY = "mamba_ssm"
#: block kind -> the block's sequence mixer
MIXERS = {"linear_attention": "mamba", "full_attention": "self_attn"}

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
GraniteHybridBlock = host("GraniteHybridBlock", MoEBlock, values=[
    # the mixture and the shared expert read one tensor: an assignment lands in it in place, so an edit reaches
    # both, as an in-place edit does
    Value("mlp_input", Residual, "What the mixture (mlp) and the shared expert (shared_experts) are both called "
          "with: an edit reaches both", child("mlp", "input"), assign_in_place=True),
], RELATIONS=(_mixer_add, _mlp_add, _shared_input, *_KEPT), MIXERS=tuple(MIXERS.values()))

# -- the mixer, the mixture and the shared expert -----------------------------------------------------------

GraniteSSD = host("GraniteSSD", SSD, values=[
    Value("attention_output", Residual,
          "The mixer's output (out_proj's); the block adds residual_multiplier times it to the residual stream",
          own("output")),
], HOST="model.layers[i].mamba")

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

ENVOYS = {hf.GraniteMoeHybridDecoderLayer: GraniteHybridBlock, hf.GraniteMoeHybridAttention: GraniteAttention,
          hf.GraniteMoeHybridMambaLayer: GraniteSSD, hf.GraniteMoeHybridMoE: GraniteMoE,
          hf.GraniteMoeHybridMLP: SharedExpert}
ROOT = host("GraniteMoeHybridStandardModel", GRANITE_ROOT, family_module=sys.modules[__name__])

build = text_only(hf.GraniteMoeHybridForCausalLM)


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): the model divides lm_head's output by logits_scaling."""
    return logits / model._module.config.logits_scaling


def layer_types(model) -> list[str]:
    return list(model.text_config.layer_types)


explain_missing = hybrid.explain_missing(MIXERS, layer_types)


def prepare(model: StandardModel) -> None:
    ssd.prepare(model, hf)


def required_paths(model: StandardModel) -> list[str]:
    if not model.text_config.num_local_experts:
        raise FamilyMismatch(f"{FAMILY}: num_local_experts is 0 (a dense 4.0-H config): nncanon serves the "
                             "mixture-of-experts checkpoints (granite-4.0-h-tiny, -small) under this family")
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.post_attention_layernorm",
            "layers.0.mlp", "layers.0.mlp.router", "layers.0.mlp.experts", "layers.0.shared_experts"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    inner = int(config.mamba_expand * config.hidden_size)
    return {"key_heads": config.mamba_n_groups, "heads": config.mamba_n_heads, "key_dim": config.mamba_d_state,
            "value_dim": config.mamba_d_head, "intermediate_size": config.shared_intermediate_size,
            "conv_dim": inner + 2 * config.mamba_n_groups * config.mamba_d_state, "conv_kernel": config.mamba_d_conv,
            "num_experts": config.num_local_experts, "top_k": config.num_experts_per_tok}
