"""Qwen3.5 / 3.6 dense text (Qwen3_5ForCausalLM, model_type qwen3_5_text).

qwen3_5_moe_text's hybrid block with a dense MLP: three blocks in four carry the gated
DeltaNet mixer linear_attn, the fourth output-gated attention self_attn (config.layer_types),
and every block ends in one SwiGLU MLP, intermediate_size wide. The released checkpoints are
qwen3_5 wrappers; nncanon builds Qwen3_5ForCausalLM from the wrapper's model.language_model
weights (text-generation only: the vision encoder is left unread).
"""

from __future__ import annotations

import sys

from transformers.models.qwen3_5 import modeling_qwen3_5 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import OutputGatedAttention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, TEXT_RENAME, Block, text_only
from ..parts.blocks.mlp import MLP
from ..parts.recurrent import deltanet
from ..parts.recurrent.deltanet import KERNELS, DeltaNet  # noqa: F401 (the family API, shared)

FAMILY = "qwen3_5_text"
MODEL_TYPES = ("qwen3_5_text",)
RENAME = TEXT_RENAME
ENVOYS = {hf.Qwen3_5DecoderLayer: Block, hf.Qwen3_5Attention: OutputGatedAttention, hf.Qwen3_5GatedDeltaNet: DeltaNet,
          hf.Qwen3_5MLP: MLP}
ROOT = host("Qwen3_5StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS, family_module=sys.modules[__name__])

build = text_only(hf.Qwen3_5ForCausalLM, wrapper_prefix="model.language_model.")
layer_types, explain_missing = deltanet.layer_types, deltanet.explain_missing


def required_paths(model: StandardModel) -> list[str]:
    return [*deltanet.HYBRID_PATHS, "layers.0.mlp.down_proj"]


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size, **deltanet.dim_sizes(model)}


def prepare(model: StandardModel) -> None:
    deltanet.prepare(model, hf)
