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
would check a plain causal mask; this family's attention host (MistralAttention) states the same
two relations with the window its module is called with, config.sliding_window. The blocks are
named sliding_attention when the config sets a window and full_attention when it does not.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

from transformers.models.mistral import modeling_mistral as hf

from ..hosts import host
from ..model import StandardModel
from ..relations import ATTENTION_RELATIONS, mix, pattern, real_queries, relation
from ._decoder import (
    MLP,
    ROOT_RELATIONS,
    ROOT_VALUES,
    TEXT_PATHS,
    TEXT_RENAME,
    Attention,
    Block,
    nothing_to_prepare,
    text_only,
)


def _windowed(module: Any) -> Any:
    """The attention's own scaling with the window MistralAttention passes to the attention
    function (config.sliding_window, None for full attention), as the shared mask reads it."""
    return SimpleNamespace(scaling=module.scaling, sliding_window=module.config.sliding_window)


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + causal mask within "
          "config.sliding_window) · attention_values",
          proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=1e-4)
def _windowed_attention(host, r):
    padding = r["model.attention_mask"]
    _, probabilities = pattern(_windowed(host._module), r["attention_queries"], r["attention_keys"], padding)
    heads = mix(probabilities, r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + causal mask within "
          "config.sliding_window; attention_probabilities == softmax(attention_scores)",
          proves="attention_scores attention_probabilities",
          reads="model.attention_mask attention_queries attention_keys attention_scores attention_probabilities",
          tolerance=1e-4)
def _windowed_pattern(host, r):
    import torch

    padding = r["model.attention_mask"]
    scores, probabilities = pattern(_windowed(host._module), r["attention_queries"], r["attention_keys"], padding)
    read_scores = r["attention_scores"].double()
    # transformers masks with the dtype's minimum, not -inf: compare where a key is allowed
    allowed = torch.isfinite(scores)
    return [(scores[allowed], read_scores[allowed]),
            (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]


_OUTPUT_PROJECTION = [r for r in ATTENTION_RELATIONS if r.text.startswith("attention_output == o_proj")]

MistralAttention = host("MistralAttention", Attention,
                        RELATIONS=(_windowed_attention, _windowed_pattern, *_OUTPUT_PROJECTION))

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
