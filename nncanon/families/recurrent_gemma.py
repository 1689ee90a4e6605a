"""RecurrentGemma (RecurrentGemmaForCausalLM, model_type recurrent_gemma): Griffin's RG-LRU blocks with local attention.

``config.block_types`` repeats over the stack (``recurrent, recurrent, attention`` on the released
checkpoints): a ``linear_attention`` block's mixer (native ``temporal_block``, standard ``mixer``) is Griffin's
recurrent block (`nncanon.parts.recurrent.rglru`: a gated branch times the RG-LRU after a short causal convolution), a
``sliding_attention`` block's is multi-query attention over the last ``attention_window_size`` keys, its rotary
on half of each head (``partial_rotary_factor``). Every block norms its input (native ``temporal_pre_norm``,
Gemma's ``rms · (1 + weight)``), adds the mixer's output, norms again (``channel_pre_norm``) and adds a gated
MLP (native ``mlp_block``: ``down(act(gate(x)) · up(x))``, ``intermediate_size / 2`` wide, with biases). The
model multiplies the embedding by sqrt(hidden_size) rounded to bfloat16 (``token_embeddings`` is the table's
row, before it) and soft-caps the logits at ``logits_soft_cap`` (``logits`` after, ``lm_head_output`` before).

The RG-LRU's values take the recurrent-state vocabulary: ``states`` (its output: the state after every token),
``state_input`` / ``state_output``, ``time_steps`` (its recurrence gate), ``decay_rates`` and ``decays``, and
the conv window ``conv_state_input`` / ``conv_state_output``.
"""

from __future__ import annotations

import sys

import torch
from transformers.models.recurrent_gemma import modeling_recurrent_gemma as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import pick, relation
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block, text_only
from ..parts.blocks.mlp import MLP
from ..parts.recurrent import rglru
from ..parts.recurrent.rglru import RGLRU
from .gemma2 import gemma_rms, softcap

FAMILY = "recurrent_gemma"
MODEL_TYPES = ("recurrent_gemma",)
RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.final_norm": "norm",
          "temporal_pre_norm": "input_layernorm", "channel_pre_norm": "post_attention_layernorm",
          "temporal_block": "mixer", "mlp_block": "mlp"}


@relation("attention_norm_output == input_layernorm(layer_input) == rms(layer_input) · (1 + input_layernorm.weight) "
          "== what mixer is called with",
          proves="attention_norm_output", reads="layer_input attention_norm_output mixer.input")
def _attention_norm(host, r):
    return [(gemma_rms(host.input_layernorm._module, r["layer_input"]), r["attention_norm_output"]),
            (r["mixer.input"], r["attention_norm_output"])]


@relation("mlp_input == mlp_norm_output == rms(layer_mid) · (1 + post_attention_layernorm.weight)",
          proves="mlp_norm_output mlp_input", reads="layer_mid mlp_norm_output mlp_input")
def _mlp_norm(host, r):
    return [(gemma_rms(host.post_attention_layernorm._module, r["layer_mid"]), r["mlp_norm_output"]),
            (r["mlp_norm_output"], r["mlp_input"])]


GriffinBlock = host("GriffinBlock", Block, MIXERS=("mixer",), RELATIONS=(
    pick(Block.RELATIONS, "layer_input + {mixer}"), pick(Block.RELATIONS, "layer_mid + mlp"), _attention_norm,
    _mlp_norm))


# the scale is rounded to bfloat16 once; the product then rounds once in float32 (STEP)
@relation("layers[0].layer_input == token_embeddings · sqrt(hidden_size) rounded to bfloat16; token_embeddings == "
          "embed_tokens.weight[input_ids]", proves="token_embeddings",
          reads="input_ids token_embeddings layers[0].layer_input")
def _scaled_embeddings(host, r):
    scale = torch.tensor(host.text_config.hidden_size ** 0.5, dtype=torch.bfloat16).double()
    return [(host.embed_tokens._module.weight[r["input_ids"]], r["token_embeddings"]),
            (r["token_embeddings"].double() * scale, r["layers[0].layer_input"])]


@relation("final_norm_output == rms(layers[-1].layer_output) · (1 + norm.weight)", proves="final_norm_output",
          reads="layers[-1].layer_output final_norm_output")
def _final_norm(host, r):
    return [(gemma_rms(host.norm._module, r["layers[-1].layer_output"]), r["final_norm_output"])]


@relation("logits == logits_soft_cap · tanh(lm_head_output / logits_soft_cap)", proves="logits",
          reads="lm_head_output logits")
def _capped_logits(host, r):
    return [(softcap(r["lm_head_output"].double(), host.text_config.logits_soft_cap), r["logits"])]


ROOT_RELATIONS_GRIFFIN = (pick(ROOT_RELATIONS, "layers[i].layer_output"), _scaled_embeddings, _final_norm,
                          pick(ROOT_RELATIONS, "lm_head_output"), _capped_logits, pick(ROOT_RELATIONS, "unembed("),
                          pick(ROOT_RELATIONS, "next_token_probs"), pick(ROOT_RELATIONS, "input_ids"),
                          pick(ROOT_RELATIONS, "attention_mask"))

ENVOYS = {hf.RecurrentGemmaDecoderLayer: GriffinBlock, hf.RecurrentGemmaAttention: Attention,
          hf.RecurrentGemmaRecurrentBlock: RGLRU, hf.RecurrentGemmaMlp: MLP}
ROOT = host("RecurrentGemmaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS_GRIFFIN,
            family_module=sys.modules[__name__])

build = text_only(hf.RecurrentGemmaForCausalLM)


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): the logit soft cap, as RecurrentGemmaForCausalLM applies it."""
    return softcap(logits, model.text_config.logits_soft_cap)


def layer_types(model) -> list[str]:
    return list(model.text_config.layers_block_type)


def required_paths(model: StandardModel) -> list[str]:
    types = layer_types(model)
    recurrent = types.index("linear_attention")
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.mixer",
            "layers.0.post_attention_layernorm", "layers.0.mlp", f"layers.{recurrent}.mixer.rg_lru"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size // 2, **rglru.dim_sizes(model)}


def prepare(model: StandardModel) -> None:
    rglru.prepare(model)
