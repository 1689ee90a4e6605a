"""Mistral (MistralForCausalLM, model_type mistral): Llama's block, with a sliding attention window.

The block, the grouped-query attention, the rotary embedding, the SwiGLU MLP and the untied head
are Llama's, module for module. What differs is the attention's reach: when the config sets
sliding_window (4096 on Mistral-7B-v0.1), every block's query at position i sees only the keys at
positions i - sliding_window + 1 to i, so the pattern is zero on every key further back; the
block is still one attention, one MLP. Mistral-7B-Instruct-v0.3 sets sliding_window to null: every
block attends to the whole prefix, as Llama's does. The rotary is unscaled ("default", theta
10,000 on v0.1, 1,000,000 on v0.3).

MistralAttention has no sliding_window attribute of its own: it passes config.sliding_window to
the attention function. The shared attention relations read the window from the module, so they
would check a plain causal mask; this family's attention host (MistralAttention) tells them the window
its module is called with (WINDOW: config.sliding_window). The blocks are
named sliding_attention when the config sets a window and full_attention when it does not.
"""

from __future__ import annotations

import sys

from transformers.models.mistral import modeling_mistral as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import (
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Block,
    nothing_to_prepare,
    text_only,
)
from ..parts.blocks.mlp import MLP

#: the shared attention relations, with the window MistralAttention hands the attention call
MistralAttention = host("MistralAttention", Attention, WINDOW=lambda module: module.config.sliding_window)

FAMILY = "mistral"
MODEL_TYPES = ("mistral",)
RENAME = TEXT_RENAME
ENVOYS = {hf.MistralDecoderLayer: Block, hf.MistralAttention: MistralAttention, hf.MistralMLP: MLP}
ROOT = host("MistralStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.MistralForCausalLM)
prepare = nothing_to_prepare


def layer_types(model) -> list[str]:
    """sliding_attention on every block when the config sets sliding_window, full_attention otherwise
    (MistralConfig has no layer_types: one window serves every block)."""
    config = model.text_config
    kind = "sliding_attention" if getattr(config, "sliding_window", None) else "full_attention"
    return [kind] * config.num_hidden_layers


def required_paths(model: StandardModel) -> list[str]:
    return TEXT_PATHS


def dim_sizes(model: StandardModel) -> dict[str, int]:
    return {"intermediate_size": model.text_config.intermediate_size}
