"""LFM2 (Lfm2ForCausalLM, model_type lfm2): gated short convolutions beside grouped-query attention.

``config.layer_types`` says what each block mixes with: ``conv`` blocks carry the gated short
convolution ``conv`` (``Lfm2ShortConv``: ``in_proj`` to B, C and x, ``B · x`` through a depthwise causal
convolution over the last ``conv_L_cache`` tokens, times C, ``out_proj``), ``full_attention`` blocks
grouped-query attention ``self_attn`` with RMS-normed queries and keys (native ``q_layernorm``,
``k_layernorm``) before the rotary. An older config gives the attention blocks as ``full_attn_idxs``;
transformers turns it into ``layer_types``. Every block norms its input (native ``operator_norm``),
adds the mixer's output, norms again (``ffn_norm``) and adds a SwiGLU MLP (native ``feed_forward``:
``w2(silu(w1(x)) · w3(x))``, its width ``intermediate_size`` cut to two thirds and rounded up to
``block_multiple_of`` when ``block_auto_adjust_ff_dim``).

The short convolution's values are `nncanon.parts.recurrent.short_conv`'s: its only state is the conv window,
``conv_state_input`` / ``conv_state_output`` as Mamba-2's and the DeltaNet's (`nncanon.parts.recurrent.conv`),
``[batch, hidden_size, conv_L_cache]``, and ``conv_states``, that window after every token.
"""

from __future__ import annotations

import sys

import torch
from transformers.models.lfm2 import modeling_lfm2 as hf

from ..core.hosts import host
from ..core.layouts import Neurons, Residual
from ..core.locators import child, own
from ..core.model import StandardModel
from ..core.relations import first, relation, rows
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block, text_only
from ..parts.recurrent import short_conv
from ..parts.recurrent.short_conv import ShortConv

FAMILY = "lfm2"
MODEL_TYPES = ("lfm2",)
RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.embedding_norm": "norm", "operator_norm": "input_layernorm",
          "ffn_norm": "post_attention_layernorm", "feed_forward": "mlp", "q_layernorm": "q_norm",
          "k_layernorm": "k_norm", "out_proj": "o_proj", "w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}

#: a block carries one of two mixers, by its layer type
MIXERS = {"conv": "conv", "full_attention": "self_attn"}

Lfm2Block = host("Lfm2Block", Block, MIXERS=tuple(MIXERS.values()))


# silu(gate) · up is one product per neuron on the module's own projections (STEP)
@relation("mlp_neurons == silu(gate_proj(input)) · up_proj(input); mlp_output == down_proj(mlp_neurons)",
          proves="mlp_neurons mlp_output", reads="input mlp_neurons mlp_output")
def _swiglu(host, r):
    module, x = host._module, rows(first(r["input"]))
    neurons = torch.nn.functional.silu(module.w1(x)) * module.w3(x)
    return [(neurons, rows(r["mlp_neurons"])), (module.w2(r["mlp_neurons"]), r["mlp_output"])]


#: the MLP calls silu as a function (no act_fn module), so the activation alone is not served
FunctionalMLP = host("FunctionalMLP", values=[
    Value("mlp_neurons", Neurons, "What the down projection receives: silu(gate_proj(x)) · up_proj(x)",
          child("down_proj", "input")),
    Value("mlp_output", Residual, "What the MLP adds to the residual stream", own("output")),
], HOST="model.layers[i].mlp", KIND="dense MLP", RELATIONS=(_swiglu,))

ENVOYS = {hf.Lfm2DecoderLayer: Lfm2Block, hf.Lfm2Attention: Attention, hf.Lfm2ShortConv: ShortConv,
          hf.Lfm2MLP: FunctionalMLP}
ROOT = host("Lfm2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Lfm2ForCausalLM)


def layer_types(model) -> list[str]:
    return list(model.text_config.layer_types)


def required_paths(model: StandardModel) -> list[str]:
    types = layer_types(model)
    conv, attention = types.index("conv"), types.index("full_attention")
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.mlp",
            "layers.0.post_attention_layernorm", f"layers.{conv}.conv", f"layers.{attention}.self_attn",
            f"layers.{attention}.self_attn.q_norm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model._module.model.layers[0].feed_forward.w1.out_features,
            **short_conv.dim_sizes(model)}


def prepare(model: StandardModel) -> None:
    short_conv.prepare(model, hf)


def explain_missing(model, envoy, name: str) -> str | None:
    """A block has conv or self_attn, never both: say which this one has."""
    types = [t.removesuffix("_dense") for t in model.family_module.layer_types(model)]
    if getattr(type(envoy), "MIXERS", None) == tuple(MIXERS.values()) and name in MIXERS.values():  # LFM2's blocks
        index = int(envoy.path.rsplit(".", 1)[-1])
        blocks = [i for i, t in enumerate(types) if MIXERS[t] == name]
        return (f"{envoy._std_path} is a {types[index]} block: it has {MIXERS[types[index]]}, not {name}; "
                f"the blocks with {name} are {blocks}")
    return None
