"""Qwen2-VL (Qwen2VLForConditionalGeneration, model_type qwen2_vl): Qwen2's decoder reading the Qwen ViT.

The text model is Qwen2's pre-norm decoder: grouped-query attention with biased q/k/v
projections and the multimodal rotary embedding (mrope_section splits each head's frequencies
between the token's time, height and width positions; on text the three are one position), and a
SwiGLU MLP. Every checkpoint is the wrapper, whose config.json is flat (the text fields at the
top, model_type qwen2_vl; transformers 5 saves them under text_config, model_type qwen2_vl_text):
task="image-text-to-text" loads it with its processor, task="text-generation" (the default) the
same wrapper without its vision encoder (transformers has no text-only class).

The vision encoder (model.visual -> vision) is the first Qwen ViT: LayerNorm blocks whose MLP is
fc1, QuickGELU, fc2 (RENAME_FC names them linear_fc1, act_fn and down_proj, as on Qwen3-VL), no
learned position embedding (the rotary embedding alone places the patches), and a merger
(-> projector) of ln_q (-> norm) and an nn.Sequential of two linears around a GELU. Its config
calls the encoder's width embed_dim and the merger's output width hidden_size, and sizes the MLP
by mlp_ratio.
"""

from __future__ import annotations

import sys

from transformers.models.qwen2_vl import modeling_qwen2_vl as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision import qwen_vit
from ..parts.vision.qwen_vit import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.qwen_vit import image_sizes, prepare, trace_inputs, vision_variants  # noqa: F401 (the family API, shared)

FAMILY = "qwen2_vl"
MODEL_TYPES = ("qwen2_vl", "qwen2_vl_text")
RENAME = {**qwen_vit.MOUNTS, **qwen_vit.RENAME_FC}
ENVOYS = {hf.Qwen2VLDecoderLayer: Block, hf.Qwen2VLAttention: Attention, hf.Qwen2MLP: MLP,
          **qwen_vit.envoys(hf.Qwen2VisionTransformerPretrainedModel, hf.Qwen2VLVisionBlock, hf.VisionAttention,
                             hf.VisionMlp)}
ROOT = host("Qwen2VLStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=qwen_vit.IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = qwen_vit.wrapper_build(hf.Qwen2VLForConditionalGeneration)
required_paths = qwen_vit.required_paths(TEXT_PATHS, ["vision.layers.0.mlp.linear_fc1", "projector.linear_fc1"])
