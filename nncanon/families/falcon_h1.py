"""Falcon-H1 (FalconH1ForCausalLM, model_type falcon_h1): attention and a Mamba-2 mixer in parallel, with muP multipliers.

Every block norms its input once (``input_layernorm``) and hands it to two mixers side by side: the
Mamba-2 mixer ``mamba`` (as is) and grouped-query attention ``self_attn`` (times
``attention_in_multiplier``); it adds ``ssm_out_multiplier · mamba output + attention_out_multiplier ·
attention output`` to the stream (``layer_mid``), then a SwiGLU MLP (native ``feed_forward``) through
``pre_ff_layernorm``. The MLP multiplies its gate projection by ``mlp_multipliers[0]`` before the
activation and its output by ``mlp_multipliers[1]``. The attention multiplies its keys by
``key_multiplier`` before the rotary. The model multiplies the embedding by ``embedding_multiplier``
(``token_embeddings`` is embed_tokens' own output, before it) and the head's logits by
``lm_head_multiplier`` (``logits`` is after it, ``lm_head_output`` before).

The mixer is Mamba-2's (`nncanon.parts.recurrent.ssd`), its input times ``ssm_in_multiplier`` and its in_proj output times a
muP vector (``ssm_multipliers`` over z, x, B, C and dt), with the same values and the same recurrent
state as the mamba2 family: ``State [batch heads key_dim value_dim]`` with ``key_dim = mamba_d_state``
and ``value_dim = mamba_d_head``, ``state`` and ``states`` under ``nncanon.route_kernels(model.family,
"torch")``. With ``mamba_rms_norm`` false (the released checkpoints) the mixer's output is ``out_proj(y ·
silu(z))`` with no norm, and ``gated_norm_output`` does not exist.
"""

from __future__ import annotations

import sys

import torch
from transformers.models.falcon_h1 import modeling_falcon_h1 as hf

from ..core.hosts import host
from ..core.layouts import Neurons, Residual
from ..core.locators import FIRST, child, own
from ..core.model import StandardModel
from ..core.precision import SUBBLOCK
from ..core.relations import called, first, pick, relation, rows
from ..core.values import Condition, Value
from ..parts.attention.softmax import ATTENTION_RELATIONS, Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.recurrent import conv, ssd
from ..parts.recurrent.ssd import KERNELS, SSD  # noqa: F401 (the family API, shared)
from ..research.weights import MLP as MLP_WEIGHTS

FAMILY = "falcon_h1"
MODEL_TYPES = ("falcon_h1",)
RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.final_layernorm": "norm",
          "feed_forward": "mlp"}
KERNEL_LIBRARY = "mamba_ssm"

# -- the block: two mixers in parallel, each scaled ---------------------------------------------------------


@relation("layer_mid == layer_input + ssm_out_multiplier · mamba.attention_output + attention_out_multiplier · "
          "self_attn.attention_output", proves="layer_mid mamba.attention_output self_attn.attention_output",
          reads="layer_input mamba.attention_output self_attn.attention_output layer_mid",
          adds=("layer_input", "mamba.attention_output", "layer_mid"))
def _parallel(host, r):
    block = host._module
    return [(r["layer_input"] + block.ssm_out_multiplier * r["mamba.attention_output"]
             + block.attn_out_multiplier * r["self_attn.attention_output"], r["layer_mid"])]


@relation("attention_norm_output == input_layernorm(layer_input) == what mamba is called with; self_attn is called "
          "with attention_norm_output · attention_in_multiplier",
          proves="attention_norm_output layer_input", reads="layer_input attention_norm_output mamba.input self_attn.input")
def _norm(host, r):
    block = host._module
    return [(block.input_layernorm(r["layer_input"]), r["attention_norm_output"]),
            (r["attention_norm_output"], r["mamba.input"]),
            (r["attention_norm_output"] * block.attention_in_multiplier, r["self_attn.input"])]


@relation("mlp_input == mlp_norm_output == pre_ff_layernorm(layer_mid)", proves="mlp_norm_output mlp_input",
          reads="layer_mid mlp_norm_output mlp_input")
def _mlp_norm(host, r):
    return [(host._module.pre_ff_layernorm(r["layer_mid"]), r["mlp_norm_output"]), (r["mlp_norm_output"], r["mlp_input"])]


@relation("layer_mid + mlp.mlp_output == layer_output", proves="layer_output mlp.mlp_output",
          reads="layer_mid mlp.mlp_output layer_output", adds=("layer_mid", "mlp.mlp_output", "layer_output"))
def _mlp_add(host, r):
    return [(r["layer_mid"] + r["mlp.mlp_output"], r["layer_output"])]


ParallelBlock = host("ParallelBlock", values=[
    Value("layer_input", Residual, "The residual stream entering the block", own("input")),
    Value("attention_norm_output", Residual, "The normed stream both mixers read", child("input_layernorm")),
    Value("layer_mid", Residual, "The residual stream after both mixers' scaled outputs are added",
          child("pre_ff_layernorm", "input"), assign_in_place=True),
    Value("mlp_norm_output", Residual, "The normed stream entering the MLP", child("pre_ff_layernorm")),
    Value("mlp_input", Residual, "What the MLP is called with", child("mlp", "input")),
    Value("layer_output", Residual, "The residual stream leaving the block", own("output", element=FIRST)),
], HOST="model.layers[i]", KIND="block", RELATIONS=(_parallel, _norm, _mlp_norm, _mlp_add), MIXERS=("self_attn",))

# -- attention: keys scaled before the rotary --------------------------------------------------------------------


@relation("attention_queries == rotary(q_proj(input)); attention_keys == rotary(k_proj(input) · key_multiplier); "
          "attention_values == v_proj(input), per head", proves="attention_queries attention_keys attention_values",
          reads="inputs attention_queries attention_keys attention_values", tolerance=SUBBLOCK)
def _projections(host, r):
    module, (args, kwargs) = host._module, r["inputs"]
    x = first(args) if args else kwargs["hidden_states"]

    def heads(t):
        return t.unflatten(-1, (-1, module.head_dim)).transpose(1, 2)

    cos, sin = kwargs["position_embeddings"]
    q, k = hf.apply_rotary_pos_emb(heads(module.q_proj(x)), heads(module.k_proj(x)) * module.key_multiplier, cos, sin)
    return [(q, r["attention_queries"]), (k, r["attention_keys"]), (heads(module.v_proj(x)), r["attention_values"])]


FalconAttention = host("FalconAttention", Attention, RELATIONS=(*ATTENTION_RELATIONS, _projections))

# -- the MLP: multiplied gate and output --------------------------------------------------------------------------


@relation("mlp_activation == act_fn(gate_proj(input) · mlp_multipliers[0]); mlp_neurons == up_proj(input) · "
          "mlp_activation; mlp_output == down_proj(mlp_neurons) · mlp_multipliers[1]",
          proves="mlp_activation mlp_neurons mlp_output", reads="input mlp_activation mlp_neurons mlp_output")
def _mlp(host, r):
    module, x = host._module, rows(first(r["input"]))
    activation = module.act_fn(module.gate_proj(x) * module.gate_multiplier)
    neurons = module.up_proj(x) * activation
    return [(activation, rows(r["mlp_activation"])), (neurons, rows(r["mlp_neurons"])),
            (module.down_proj(neurons) * module.down_multiplier, rows(r["mlp_output"]))]


FalconMLP = host("FalconMLP", values=[
    Value("mlp_activation", Neurons, "The activation function's output: act(gate_proj(x) · mlp_multipliers[0])",
          child("act_fn")),
    Value("mlp_neurons", Neurons, "What the down projection receives: up · activation", child("down_proj", "input")),
    Value("mlp_output", Residual, "What the MLP adds to the stream: down_proj(neurons) · mlp_multipliers[1]",
          own("output")),
], HOST="model.layers[i].mlp", KIND="dense MLP", RELATIONS=(_mlp,), **MLP_WEIGHTS)

# -- the mixer: Mamba-2's, its output gated with no norm on the released checkpoints -------------------------------

GATED_NORM = Condition(needs="", why="the checkpoint sets mamba_rms_norm false: the mixer gates y by silu(z) with no "
                       "norm, so no norm output exists", holds=lambda model: bool(model.text_config.mamba_rms_norm))


@relation("attention_output == out_proj(attention_head_outputs · silu(z)), z = (in_proj(input · ssm_in_multiplier) · "
          "muP vector)'s first mamba_d_ssm columns (mamba_rms_norm false: no norm)",
          proves="attention_head_outputs attention_output", reads="inputs attention_head_outputs attention_output",
          tolerance=SUBBLOCK)
def _gated_out(host, r):
    module, (args, kwargs) = host._module, r["inputs"]
    x = first(args) if args else kwargs["hidden_states"]
    mask = kwargs.get("attention_mask")
    if mask is not None:
        x = x * mask[:, :, None].to(x.dtype)
    z = (module.in_proj(x * module.ssm_in_multiplier) * module.mup_vector)[..., :module.intermediate_size]
    heads = r["attention_head_outputs"]
    y = heads.reshape(*heads.shape[:2], -1)
    if module.mamba_rms_norm:
        y = module.norm(y, z)
    else:
        y = y * torch.nn.functional.silu(z)
    return [(called(module.out_proj, y), r["attention_output"])]


CONV_RELATIONS = conv.conv_relations(ssd.conv_input, "(in_proj(input · ssm_in_multiplier) · muP vector)'s x, B, "
                                                        "C columns")

FalconSSD = host("FalconSSD", SSD, values=[
    Value("gated_norm_output", Neurons, "The gated RMSNorm's output (mamba_rms_norm true only), what out_proj reads",
          child("norm"), conditions=(GATED_NORM,)),
], HOST="model.layers[i].mamba", RELATIONS=(*SSD.RELATIONS[:2], _gated_out, SSD.RELATIONS[3],
                                                   ssd.mixer_relation(False), *CONV_RELATIONS))
assert SSD.RELATIONS[2].text.startswith("attention_output == out_proj(gated_norm_output)")  # the one replaced
assert SSD.RELATIONS[4] is ssd.MIXER and SSD.RELATIONS[5:] == ssd.CONV_RELATIONS  # stated again with Falcon-H1's projection

# -- the root: multiplied embedding and logits -------------------------------------------------------------------


@relation("layers[0].layer_input == token_embeddings · embedding_multiplier", proves="token_embeddings",
          reads="token_embeddings layers[0].layer_input")
def _embeddings(host, r):
    return [(r["token_embeddings"] * host.text_config.embedding_multiplier, r["layers[0].layer_input"])]


@relation("logits == lm_head_output · lm_head_multiplier", proves="logits", reads="lm_head_output logits")
def _logits(host, r):
    return [(r["lm_head_output"] * host.text_config.lm_head_multiplier, r["logits"])]


ROOT_RELATIONS_FALCON = (pick(ROOT_RELATIONS, "layers[i].layer_output"), _embeddings,
                         pick(ROOT_RELATIONS, "final_norm_output"), pick(ROOT_RELATIONS, "lm_head_output"), _logits, pick(ROOT_RELATIONS, "unembed("),
                         pick(ROOT_RELATIONS, "next_token_probs"), pick(ROOT_RELATIONS, "input_ids"),
                         pick(ROOT_RELATIONS, "attention_mask"))

ENVOYS = {hf.FalconH1DecoderLayer: ParallelBlock, hf.FalconH1Attention: FalconAttention, hf.FalconH1Mixer: FalconSSD,
          hf.FalconH1MLP: FalconMLP}
ROOT = host("FalconH1StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_FALCON,
            family_module=sys.modules[__name__])

build = text_only(hf.FalconH1ForCausalLM)


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): FalconH1ForCausalLM multiplies by lm_head_multiplier."""
    return logits * model._module.model.lm_head_multiplier


def prepare(model: StandardModel) -> None:
    ssd.prepare(model, hf)


def layer_types(model) -> list[str]:
    return ["parallel"] * model.text_config.num_hidden_layers


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
            "layers.0.mamba", "layers.0.pre_ff_layernorm", "layers.0.mlp"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    ssm = config.mamba_d_ssm if config.mamba_d_ssm is not None else int(config.mamba_expand * config.hidden_size)
    return {"key_heads": config.mamba_n_groups, "heads": config.mamba_n_heads, "key_dim": config.mamba_d_state,
            "value_dim": config.mamba_d_head, "intermediate_size": config.intermediate_size,
            "conv_dim": ssm + 2 * config.mamba_n_groups * config.mamba_d_state, "conv_kernel": config.mamba_d_conv}
