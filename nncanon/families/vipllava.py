"""VipLLaVA (VipLlavaForConditionalGeneration, model_type vipllava): LLaVA-1.5's Llama decoder and CLIP tower, the
projector reading five of the tower's hidden states side by side through a LayerNorm.

The wrapper (``model.model`` a VipLlavaModel) holds a CLIP vision tower (``model.vision_tower`` -> ``vision``, a
CLIPVisionModel), the projector (``model.multi_modal_projector`` -> ``projector``: projector_layernorm, linear_1,
GELU, linear_2) and the text model (``model.language_model``, Llama's decoder, whose blocks, attention and MLP are
Llama's hosts unchanged). It is LLaVA's line (`nncanon.parts.vision.vision_towers`) but for what the projector
reads (`nncanon.parts.vision.stacked_features`):

- the tower runs each image on its own row, ``[images, 1 + patches, width]``, as LLaVA's: class token and learned
  positions (``vision.patch_embeddings``), ``pre_layrnorm``, pre-norm LayerNorm blocks with a QuickGELU MLP;
- the wrapper reads the hidden states at every index of ``vision_feature_layer`` (-2, -5, -8, -11 and 6 on
  ViP-LLaVA 7B: four from the end, one from the start, in that order), drops each one's class token and lays them
  side by side along the width (``vision.tower_output``, five times the tower's width): no
  vision_feature_select_strategy, the class token is always dropped;
- the projector norms that row (projector_layernorm -> ``norm``, a LayerNorm) before its two linears
  (``linear_fc1``, ``act_fn``, ``down_proj``), one image token per patch (``vision.image_features``), scattered at
  the prompt's image tokens (``vision.image_token_mask``).

task="text-generation" (the default) loads the wrapper without its tower and projector; "image-text-to-text" with
its processor (LLaVA's: ViP-LLaVA ships LlavaProcessor).
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.clip import modeling_clip as clip
from transformers.models.llama import modeling_llama as llama
from transformers.models.vipllava import modeling_vipllava as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.stacked_features import stacked_tower
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_line import install_sources as prepare  # noqa: F401 (the family API: the .source op image_features reads)
from ..parts.vision.vision_towers import (  # noqa: F401 (the family API)
    LLAVA_RENAME,
    TowerAttention,
    TowerBlock,
    TowerMLP,
    example_images,
    llava_required_paths,
    tower_build,
    trace_inputs,
)
from ..parts.vision.vision_towers import image_sizes as _tower_sizes

FAMILY = "vipllava"
MODEL_TYPES = ("vipllava",)
RENAME = {**LLAVA_RENAME, "projector_layernorm": "norm"}
VipLlavaVision = stacked_tower("VipLlavaVision")
ENVOYS = {llama.LlamaDecoderLayer: Block, llama.LlamaAttention: Attention, llama.LlamaMLP: MLP,
          clip.CLIPVisionModel: VipLlavaVision, clip.CLIPEncoderLayer: TowerBlock, clip.CLIPAttention: TowerAttention,
          clip.CLIPMLP: TowerMLP}
ROOT = host("VipLlavaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.VipLlavaForConditionalGeneration)

required_paths = llava_required_paths("vision.pre_layrnorm", "projector.norm")


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The tower's image dimensions (`vision_towers.image_sizes`) and ``stacked_width``, the row the projector reads:
    the tower's width once per index of vision_feature_layer."""
    sizes = _tower_sizes(model, args, kwargs)
    sizes["stacked_width"] = model.vision.stacked_width
    return sizes
