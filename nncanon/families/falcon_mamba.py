"""Falcon-Mamba (FalconMambaForCausalLM, model_type falcon_mamba): Mamba-1 with RMS norms on dt, B and C.

The tree, the block and the mixer are Mamba's (`nncanon.families.mamba`, `nncanon.parts.recurrent.selective_scan`), with
one difference inside the mixer: after ``x_proj`` splits each token's dt, B and C, each goes through a weightless
RMSNorm (``dt_layernorm``, ``b_layernorm``, ``c_layernorm``: ``v / sqrt(mean(v²) + mixer_rms_eps)``; their
``weight`` buffers are ones kept for the fused kernel's signature and unused), before ``dt_proj`` widens dt and
before the scan reads B and C. So ``attention_keys`` and ``attention_queries`` are the normed B and C, and
``time_steps`` is ``softplus(dt_proj.weight · rms(dt) + dt_proj.bias)``; the mixer's relation states the norms.
"""

from __future__ import annotations

import sys

from transformers.models.falcon_mamba import modeling_falcon_mamba as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, text_only
from ..parts.recurrent import selective_scan
from ..parts.recurrent.selective_scan import KERNELS, SelectiveScan  # noqa: F401 (the family API, shared)
from .mamba2 import MambaBlock, before_the_head, past_the_head  # noqa: F401 (Mamba-2's block and head, the same)

FAMILY = "falcon_mamba"
MODEL_TYPES = ("falcon_mamba",)
RENAME = {"backbone.embeddings": "embed_tokens", "backbone.layers": "layers", "backbone.norm_f": "norm"}
#: the library whose fused kernels transformers would bind instead of its torch scan (the loads' label)
KERNEL_LIBRARY = "mamba_ssm"

#: Mamba-1's mixer whose scan inputs carry the B, C and dt norms
NormedSelectiveScan = host("NormedSelectiveScan", SelectiveScan, KIND="Falcon-Mamba mixer",
                           RELATIONS=selective_scan.relations(True))

ENVOYS = {hf.FalconMambaBlock: MambaBlock, hf.FalconMambaMixer: NormedSelectiveScan}
ROOT = host("FalconMambaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            **selective_scan.ROOT_SIZES, family_module=sys.modules[__name__])

build = text_only(hf.FalconMambaForCausalLM)


def prepare(model: StandardModel) -> None:
    selective_scan.prepare(model, hf, NormedSelectiveScan)


def layer_types(model) -> list[str]:
    return ["falcon_mamba"] * model.text_config.num_hidden_layers


def required_paths(model: StandardModel) -> list[str]:
    return ["embed_tokens", "layers", "norm", "lm_head", "layers.0.norm", "layers.0.mixer",
            "layers.0.mixer.b_layernorm"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    config = model.text_config
    return {**selective_scan.dim_sizes(config.intermediate_size, config.state_size, config.conv_kernel),
            "intermediate_size": config.intermediate_size}
