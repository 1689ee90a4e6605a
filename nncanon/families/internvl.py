"""InternVL (InternVLForConditionalGeneration, model_type internvl): InternVL3, a Qwen2 decoder reading an InternViT
tower through a pixel-shuffle MLP projector, each image cut into tiles and a thumbnail.

The wrapper (``model.model`` an InternVLModel) holds the tower (``model.vision_tower`` -> ``vision``, an
InternVLVisionModel), the projector (``model.multi_modal_projector`` -> ``projector``: layer_norm, linear_1, GELU,
linear_2) and the text model (``model.language_model``, Qwen2's decoder, whose blocks, attention and MLP are
Llama's hosts unchanged). It is the shared vision line (`nncanon.parts.vision.vision_line`) with InternViT
(`nncanon.parts.vision.internvl`):

- the processor cuts each image into tiles of the tower's image_size (at most max_patches, the grid closest to the
  image's aspect) and a thumbnail; each tile is one row of the tower's batch, ``[tiles, 1 + patches, width]``: a
  class token and learned positions (``vision.patch_embeddings``), then pre-norm LayerNorm blocks whose attention
  and MLP outputs are scaled per channel (``lambda_1``, ``lambda_2``) before each residual add;
- the wrapper reads the last hidden state, drops the class token and folds each 2 x 2 square of a tile's patches
  into one row (``vision.tower_output``, four times the tower's width); the projector norms it and maps it with two
  linears to one image token (``vision.image_features``), scattered at the prompt's ``<IMG_CONTEXT>`` tokens
  (``vision.image_token_mask``), each image's tokens between ``<img>`` and ``</img>``.

task="text-generation" (the default) loads the wrapper without its tower and projector; "image-text-to-text" with
its processor (InternVLProcessor's, without its video processor).
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.internvl import modeling_internvl as hf
from transformers.models.qwen2 import modeling_qwen2 as qwen2

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.internvl import INTERNVL_RENAME, LayerScaleTowerBlock, internvl_tower
from ..parts.vision.internvl import image_sizes as image_sizes  # noqa: F401 (the family API)
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_line import install_sources as prepare  # noqa: F401 (the family API: the .source op image_features reads)
from ..parts.vision.vision_towers import (  # noqa: F401 (the family API)
    LLAVA_RENAME,
    TowerAttention,
    TowerMLP,
    example_images,
    tower_build,
    trace_inputs,
)

FAMILY = "internvl"
MODEL_TYPES = ("internvl",)
#: the llava wrapper's paths and CLIP's MLP names (fc1, activation_fn, fc2), InternViT's names inside the tower
RENAME = {**LLAVA_RENAME, **INTERNVL_RENAME}
InternVLVision = internvl_tower("InternVLVision")
ENVOYS = {qwen2.Qwen2DecoderLayer: Block, qwen2.Qwen2Attention: Attention, qwen2.Qwen2MLP: MLP,
          hf.InternVLVisionModel: InternVLVision, hf.InternVLVisionLayer: LayerScaleTowerBlock,
          hf.InternVLVisionAttention: TowerAttention, hf.InternVLVisionMLP: TowerMLP}
ROOT = host("InternVLStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.InternVLForConditionalGeneration)

#: the standard paths of the tower and projector (image-text-to-text only)
VISION_PATHS = ["vision", "projector", "vision.embeddings", "vision.layers.0.input_layernorm",
                "vision.layers.0.post_attention_layernorm", "vision.layers.0.self_attn.o_proj",
                "vision.layers.0.mlp.linear_fc1", "vision.layers.0.mlp.act_fn", "vision.layers.0.mlp.down_proj",
                "projector.norm", "projector.linear_fc1", "projector.act_fn", "projector.down_proj"]


def required_paths(model: Any) -> list[str]:
    return [*TEXT_PATHS, *VISION_PATHS] if model.task == "image-text-to-text" else list(TEXT_PATHS)
