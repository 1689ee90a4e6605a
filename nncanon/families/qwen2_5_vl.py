"""Qwen2.5-VL (Qwen2_5_VLForConditionalGeneration, model_type qwen2_5_vl): Qwen2's decoder reading a windowed ViT.

The text model is Qwen2-VL's (Qwen2's pre-norm decoder, biased q/k/v, the multimodal rotary
embedding, a SwiGLU MLP), and so is the loading: every checkpoint is the wrapper;
task="image-text-to-text" loads it with its processor, task="text-generation" (the default) the
same wrapper without its vision encoder.

The vision encoder (model.visual -> vision) is the Qwen ViT with RMSNorm blocks, a biased SwiGLU
MLP (gate_proj, up_proj, down_proj: its standard names already) and windowed attention: on every
block but those of vision_config.fullatt_block_indexes each image's attention runs once per window
of window_size pixels (112: 4 x 4 merge blocks), whose split points are the block's cu_seqlens.
So that each window is consecutive rows, the encoder permutes the merge blocks into window order
right after patch_embed and puts them back after the merger: every block's values, tower_output
and projector.output are in window order, vision.image_features (what the text model receives) in
merge-block order again. vision.window_index is the permutation: row block b of the window-ordered
stream is merge block window_index[b]. The merger (-> projector) is ln_q (an RMSNorm, -> norm) and
an nn.Sequential of two linears around a GELU, named as on Qwen2-VL (RENAME_FC).
"""

from __future__ import annotations

import sys

from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as hf

from ..core.hosts import host
from ..core.layouts import layout
from ..core.locators import op
from ..core.model import StandardModel
from ..core.values import Value
from ..core.views import READ_ONLY
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision import qwen_vit
from ..parts.vision.qwen_vit import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.qwen_vit import image_sizes, prepare, trace_inputs, vision_variants  # noqa: F401 (the family API, shared)

FAMILY = "qwen2_5_vl"
MODEL_TYPES = ("qwen2_5_vl", "qwen2_5_vl_text")
RENAME = {**qwen_vit.MOUNTS, **qwen_vit.RENAME_FC}

WindowIndex = layout("WindowIndex", "image_tokens")

#: ``model.vision``: the Qwen ViT with its window order
WindowedVision = host("QwenWindowedVision", qwen_vit.Vision, values=[
    Value("window_index", WindowIndex,
          "The window order: merge block b of the encoder's stream is merge block window_index[b] of the "
          "processor's row (every image's blocks, images one after another); read-only",
          op("get_vision_window_index_0", element=0), view=READ_ONLY),
], HOST="model.vision", RELATIONS=qwen_vit.WINDOWED_VISION_RELATIONS)

ENVOYS = {hf.Qwen2_5_VLDecoderLayer: Block, hf.Qwen2_5_VLAttention: Attention, hf.Qwen2MLP: MLP,
          **qwen_vit.envoys(hf.Qwen2_5_VisionTransformerPretrainedModel, hf.Qwen2_5_VLVisionBlock,
                             hf.Qwen2_5_VLVisionAttention, hf.Qwen2_5_VLMLP, vision_host=WindowedVision,
                             mlp_host=qwen_vit.GatedVisionMLP)}
ROOT = host("Qwen2_5_VLStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=qwen_vit.IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = qwen_vit.wrapper_build(hf.Qwen2_5_VLForConditionalGeneration)
required_paths = qwen_vit.required_paths(TEXT_PATHS, ["vision.layers.0.mlp.gate_proj", "projector.linear_fc1"])

