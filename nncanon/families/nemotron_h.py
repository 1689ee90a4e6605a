"""Nemotron-H (NemotronHForCausalLM, model_type nemotron_h): a stack of one-sublayer blocks of three kinds.

Every block is ``x + sublayer(norm(x))`` with one sublayer, native ``mixer``, whose kind the config's
``hybrid_override_pattern`` gives per block (``layers_block_type``): ``M`` a Mamba-2 mixer
(``linear_attention``), ``*`` grouped-query attention with no position encoding at all (``full_attention``),
``-`` an MLP with no gate, ``down(relu(up(x))²)`` (``mlp``). nncanon names the sublayer by its kind (RENAME by
class): ``mamba``, ``self_attn`` or ``mlp``, so ``model.layers[i].mamba.state_output`` means what it means on
bamba, falcon_h1 and mamba2, and a block asked for a sublayer it lacks says which blocks have it. The Mamba-2
mixer is transformers' Mamba2Mixer with its config fields renamed, its width ``mamba_num_heads x
mamba_head_dim`` (not ``expand x hidden_size``) and its time steps clamped below at ``time_step_min`` on a
prompt; `nncanon.parts.recurrent.ssd` serves it under the mamba2 family's names and layouts (``key_dim =
ssm_state_size``, ``value_dim = mamba_head_dim``). The model returns float32 logits. The mixture-of-experts
kind (``E``, Nemotron 3's checkpoints) is not covered: this family refuses a config that has one.
"""

from __future__ import annotations

import sys

from transformers.models.nemotron_h import modeling_nemotron_h as hf

from ..core.hosts import host
from ..core.layouts import Residual
from ..core.locators import FIRST, child, own
from ..core.model import StandardModel
from ..core.relations import first, relation
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.blocks.ungated import ungated_mlp
from ..parts.recurrent import hybrid, ssd
from ..parts.recurrent.ssd import KERNELS, SSD  # noqa: F401 (the family API, shared)

FAMILY = "nemotron_h"
MODEL_TYPES = ("nemotron_h",)
#: the one sublayer of a block is ``mixer`` whatever its kind: aliased by class to the kind's standard name
RENAME = {"model.embeddings": "embed_tokens", "model.layers": "layers", "model.norm_f": "norm",
          hf.NemotronHMamba2Mixer: "mamba", hf.NemotronHAttention: "self_attn", hf.NemotronHMLP: "mlp"}
KERNEL_LIBRARY = "mamba_ssm"
#: block kind -> the block's sublayer
MIXERS = {"linear_attention": "mamba", "full_attention": "self_attn", "mlp": "mlp"}


@relation("layer_input + {mixer}'s output == layer_output", proves="layer_output",
          reads="layer_input {mixer}.output layer_output", adds=("layer_input", "{mixer}.output", "layer_output"))
def _add(host, r):
    return [(r["layer_input"] + first(r["{mixer}.output"]), r["layer_output"])]


@relation("attention_norm_output == norm(layer_input) == what {mixer} is called with",
          proves="attention_norm_output", reads="layer_input attention_norm_output {mixer}.input")
def _norm(host, r):
    return [(host.norm._module(r["layer_input"]), r["attention_norm_output"]),
            (r["{mixer}.input"], r["attention_norm_output"])]


NemotronBlock = host("NemotronBlock", values=[
    Value("layer_input", Residual, "The residual stream entering the block", own("input")),
    Value("attention_norm_output", Residual, "The normed stream entering the block's one sublayer (its Mamba-2 "
          "mixer, attention or MLP)", child("norm")),
    Value("layer_output", Residual, "The residual stream leaving the block: the input plus the sublayer's output",
          own("output", element=FIRST)),
], HOST="model.layers[i]", KIND="block", RELATIONS=(_add, _norm), MIXERS=tuple(MIXERS.values()))

NemotronSSD = host("NemotronSSD", SSD, HOST="model.layers[i].mamba")
NemotronMLP = ungated_mlp("up_proj")

ENVOYS = {hf.NemotronHBlock: NemotronBlock, hf.NemotronHAttention: Attention, hf.NemotronHMamba2Mixer: NemotronSSD,
          hf.NemotronHMLP: NemotronMLP}
ROOT = host("NemotronHStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.NemotronHForCausalLM)


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): NemotronHForCausalLM returns float32 logits."""
    return logits.float()


def layer_types(model) -> list[str]:
    return list(model.text_config.layers_block_type)


explain_missing = hybrid.explain_missing(MIXERS, layer_types)


def prepare(model: StandardModel) -> None:
    ssd.prepare(model, hf)


def required_paths(model: StandardModel) -> list[str]:
    if moe := [i for i, t in enumerate(layer_types(model)) if t not in MIXERS]:
        raise ValueError(f"{FAMILY}: blocks {moe} are mixture-of-experts blocks (E in hybrid_override_pattern), "
                         "which this family does not cover yet; it covers M, * and - blocks")
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.norm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    inner = config.mamba_num_heads * config.mamba_head_dim
    return {"key_heads": config.n_groups, "heads": config.mamba_num_heads, "key_dim": config.ssm_state_size,
            "value_dim": config.mamba_head_dim, "intermediate_size": config.intermediate_size,
            "conv_dim": inner + 2 * config.n_groups * config.ssm_state_size, "conv_kernel": config.conv_kernel}
