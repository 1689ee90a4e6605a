"""Qwen3-VL (Qwen3VLForConditionalGeneration, model_type qwen3_vl): Qwen3's decoder with DeepStack.

The text model is Qwen3's dense decoder (query and key RMSNorms per head before the rotary, no
attention bias, a SwiGLU MLP) with the interleaved multimodal rotary embedding. Every checkpoint
is the wrapper: task="image-text-to-text" loads it with its processor, task="text-generation" (the
default) the same wrapper without its vision encoder (transformers has no text-only class).

The vision encoder (model.visual -> vision) is the Qwen ViT in the Qwen3-VL spelling: LayerNorm
blocks, linear_fc1, GELU (tanh), linear_fc2 (-> down_proj), a learned pos_embed resampled to
each image's grid and added after patch_embed, and a merger (-> projector) of norm, linear_fc1,
GELU and linear_fc2. DeepStack: after each vision block listed in
vision_config.deepstack_visual_indexes, a merger of its own (deepstack_merger_list[j] ->
deepstack_projectors[j], which norms the folded 4 * vision_hidden_size vector) maps the stream
to the text width, and the text model adds the result to the image tokens of the stream leaving
text block j: model.layers[j].deepstack_output (DeepStackBlock, served where the text model adds
it), for j below len(deepstack_visual_indexes).
"""

from __future__ import annotations

import sys

from transformers.models.qwen3_vl import modeling_qwen3_vl as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision import qwen_vit
from ..parts.vision.qwen_vit import DeepStackBlock, image_sizes, prepare, trace_inputs, vision_variants  # noqa: F401 (the family API, shared)
from ..parts.vision.qwen_vit import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)

FAMILY = "qwen3_vl"
MODEL_TYPES = ("qwen3_vl", "qwen3_vl_text")
RENAME = {**qwen_vit.MOUNTS, **qwen_vit.RENAME, **qwen_vit.DEEPSTACK_MOUNTS}
ENVOYS = {hf.Qwen3VLTextDecoderLayer: DeepStackBlock, hf.Qwen3VLTextAttention: Attention, hf.Qwen3VLTextMLP: MLP,
          **qwen_vit.envoys(hf.Qwen3VLVisionModel, hf.Qwen3VLVisionBlock, hf.Qwen3VLVisionAttention,
                             hf.Qwen3VLVisionMLP, vision_host=qwen_vit.DeepStackVision)}
ROOT = host("Qwen3VLStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=qwen_vit.DEEPSTACK_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = qwen_vit.wrapper_build(hf.Qwen3VLForConditionalGeneration)
required_paths = qwen_vit.required_paths([*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm"],
                                          qwen_vit.DEEPSTACK_PATHS)
