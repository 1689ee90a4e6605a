"""LLaVA-NeXT-Video (LlavaNextVideoForConditionalGeneration, model_type llava_next_video): LLaVA-NeXT's AnyRes
image line on a Vicuna (Llama) decoder, with a second way in for videos: frames through the same tower, pooled.

The wrapper (``model.model`` a LlavaNextVideoModel) holds the CLIP tower (``model.vision_tower`` -> ``vision``),
the two-layer MLP projector (``model.multi_modal_projector`` -> ``projector``), a learned ``image_newline``, a
pooler (``model.vision_resampler``) and the text model (``model.language_model``: Llama's decoder, whose blocks,
attention and MLP are Llama's hosts). An image takes llava_next's path unchanged, and its values and relations are
llava_next's (`nncanon.families.llava_next`): a base tile and the tiles of its best ``image_grid_pinpoints`` grid,
the tower read at ``vision_feature_layer``, the projector per tile (``vision.tile_features``), the grid unpadded and
closed by ``image_newline`` per row (``vision.image_features``), scattered at the ``<image>`` tokens.

A video's frames run through the same tower, each frame one row; the hidden state at ``vision_feature_layer`` less
its class token is laid back on the frame's patch grid and average-pooled in spatial_pool_stride x
spatial_pool_stride squares (``vision_resampler``, spatial_pool_mode "average") before the projector: a quarter of
a frame's patches, every frame's tokens one after another at the ``<video>`` tokens, no newline and no tiles. The
tiny checkpoint's processor is LlavaNextProcessor (images and text): LlavaNextVideoProcessor needs its video
processor, which needs torchvision, not installed here. So no value is served on a video; the notes run the video
path on the tiny checkpoint at build and check the pooling and the scatter.

task="text-generation" (the default) loads the wrapper without its tower and projector; "image-text-to-text" with
its processor.
"""

from __future__ import annotations

import sys

from transformers.models.clip import modeling_clip as clip
from transformers.models.llama import modeling_llama as llama
from transformers.models.llava_next_video import modeling_llava_next_video as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_towers import TowerAttention, TowerBlock, TowerMLP, tower_build
from .llava_next import (  # noqa: F401 (the family API, shared with llava_next)
    RENAME,
    LlavaNextVision,
    dim_sizes,
    example_images,
    image_sizes,
    prepare,
    required_paths,
    trace_inputs,
)

FAMILY = "llava_next_video"
MODEL_TYPES = ("llava_next_video",)

ENVOYS = {llama.LlamaDecoderLayer: Block, llama.LlamaAttention: Attention, llama.LlamaMLP: MLP,
          clip.CLIPVisionModel: LlavaNextVision, clip.CLIPEncoderLayer: TowerBlock, clip.CLIPAttention: TowerAttention,
          clip.CLIPMLP: TowerMLP}
ROOT = host("LlavaNextVideoStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.LlavaNextVideoForConditionalGeneration)
