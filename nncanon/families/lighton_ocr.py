"""LightOnOCR (LightOnOcrForConditionalGeneration, model_type lighton_ocr): a Qwen3 decoder reading Mistral 3's
Pixtral tower through its patch merger, for reading documents.

The wrapper (``model.model`` a LightOnOcrModel) holds the Pixtral tower (``model.vision_encoder`` -> ``vision``),
the projector (``model.vision_projection`` -> ``projector``: an RMSNorm, the patch merger, linear_1, GELU, linear_2,
no biases) and the text model (``model.language_model``, Qwen3's decoder: Llama's blocks with q/k norms, whose
hosts are qwen3's). The tower and the projector are mistral3's (`nncanon.parts.vision.pixtral`), read at other paths:

- every image keeps its own size (longest edge capped, each side a multiple of the patch); the tower crops each
  image's patch embeddings to its ``image_sizes`` and lays every image's patches in one row
  (``vision.patch_embeddings``), normed by ``ln_pre``; its RMSNorm blocks with a gated MLP attend with a
  block-diagonal mask and a 2D rotary;
- the projector reads the last hidden state (the wrapper has no vision_feature_layer; ``vision.tower_output``),
  norms it, merges each 2 x 2 square of an image's patches into one row and maps it with two linears to one image
  token (``vision.image_features``), scattered at the prompt's ``<|image_pad|>`` tokens (``vision.image_token_mask``).
  Unlike Mistral 3's processor, LightOnOCR's writes no row breaks: an image is one run of image tokens.

task="text-generation" (the default) loads the wrapper without its tower and projector; "image-text-to-text" with
its processor (LightOnOcrProcessor).
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.lighton_ocr import modeling_lighton_ocr as hf
from transformers.models.pixtral import modeling_pixtral as pixtral
from transformers.models.qwen3 import modeling_qwen3 as qwen3

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.pixtral import PIXTRAL_RENAME, PixtralAttention, TowerGatedMLP, pixtral_tower
from ..parts.vision.pixtral import image_sizes as image_sizes  # noqa: F401 (the family API)
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_line import install_sources as prepare  # noqa: F401 (the family API: the .source op image_features reads)
from ..parts.vision.vision_towers import LLAVA_RENAME, TowerBlock, example_images, tower_build, trace_inputs  # noqa: F401 (the family API)
from .mistral3 import VISION_PATHS

FAMILY = "lighton_ocr"
MODEL_TYPES = ("lighton_ocr",)
#: the llava wrapper's names with LightOnOCR's tower and projector paths, Pixtral's names inside the tower
RENAME = {**{k: v for k, v in LLAVA_RENAME.items() if v not in ("vision", "projector")},
          "model.vision_encoder": "vision", "model.vision_projection": "projector", **PIXTRAL_RENAME}
LightOnOcrVision = pixtral_tower("LightOnOcrVision", projector="model.vision_projection")
ENVOYS = {qwen3.Qwen3DecoderLayer: Block, qwen3.Qwen3Attention: Attention, qwen3.Qwen3MLP: MLP,
          pixtral.PixtralVisionModel: LightOnOcrVision, pixtral.PixtralAttentionLayer: TowerBlock,
          pixtral.PixtralAttention: PixtralAttention, pixtral.PixtralMLP: TowerGatedMLP}
ROOT = host("LightOnOcrStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.LightOnOcrForConditionalGeneration, tower="vision_encoder", projector="vision_projection")


def required_paths(model: Any) -> list[str]:
    text = [*TEXT_PATHS, "layers.0.self_attn.q_norm", "layers.0.self_attn.k_norm"]
    return [*text, *VISION_PATHS] if model.task == "image-text-to-text" else text
