"""Qwen2 and Qwen2.5 (Qwen2ForCausalLM, model_type qwen2): Llama's block with biased q, k and v.

The block, the grouped-query attention, the rotary embedding, the SwiGLU MLP and the hosts are
Llama's. The attention differs in one place: q_proj, k_proj and v_proj carry a bias (always: the
config has no switch for it), o_proj does not; the queries and keys are rotated after the bias is
added, so attention_queries is rotate(q_proj(x)) with q_proj's bias in it. There are no q/k norms
(Qwen3 added them). The small checkpoints (Qwen2-0.5B and Qwen2.5-3B here) tie lm_head to
embed_tokens. The configs name a sliding_window, but use_sliding_window is false on these
checkpoints and transformers then sets sliding_window to None: every block is full attention.
Every host is the shared one of nncanon.parts, unchanged.
"""

from __future__ import annotations

import sys

from transformers.models.qwen2 import modeling_qwen2 as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_RELATIONS, ROOT_VALUES, Block, text_only
from ..parts.blocks.mlp import MLP
from . import llama

FAMILY = "qwen2"
MODEL_TYPES = ("qwen2",)
RENAME = llama.RENAME
ENVOYS = {hf.Qwen2DecoderLayer: Block, hf.Qwen2Attention: Attention, hf.Qwen2MLP: MLP}
ROOT = host("Qwen2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = text_only(hf.Qwen2ForCausalLM)
layer_types, dim_sizes, prepare = llama.layer_types, llama.dim_sizes, llama.prepare


def required_paths(model: StandardModel) -> list[str]:
    return llama.required_paths(model)
