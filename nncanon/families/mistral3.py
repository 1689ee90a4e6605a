"""Mistral 3 (Mistral3ForConditionalGeneration, model_type mistral3): Mistral Small 3.1 / 3.2, a Mistral decoder
reading a Pixtral vision tower through a patch merger.

The wrapper (``model.model`` a Mistral3Model) holds the Pixtral tower (``model.vision_tower`` -> ``vision``, a
PixtralVisionModel), the projector (``model.multi_modal_projector`` -> ``projector``: norm, patch_merger, linear_1,
GELU, linear_2) and the text model (``model.language_model``, Mistral's decoder, whose blocks, attention and MLP are
Llama's hosts unchanged). It is the shared vision line (`nncanon.parts.vision.vision_line`) with the Pixtral tower
and its merger (`nncanon.parts.vision.pixtral`):

- every image keeps its own size (longest edge capped, each side a multiple of the patch): the tower crops each
  image's patch embeddings to its ``image_sizes`` and lays every image's patches in one row
  (``vision.patch_embeddings``), normed by ``ln_pre``; its RMSNorm blocks with a gated MLP attend with a
  block-diagonal mask (each image sees only itself) and a 2D rotary (a patch turned by its row and its column);
- the projector reads the last block's output (``vision_feature_layer`` -1, ``vision.tower_output``), norms it,
  merges each 2 x 2 square of an image's patches into one row and maps it with two linears to one image token
  (``vision.image_features``), scattered at the prompt's ``[IMG]`` tokens (``vision.image_token_mask``); the
  processor closes each row of an image's tokens with ``[IMG_BREAK]`` and the image with ``[IMG_END]``.

task="text-generation" (the default) loads the wrapper without its tower and projector; "image-text-to-text" with
its processor (PixtralProcessor).
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.mistral import modeling_mistral as mistral
from transformers.models.mistral3 import modeling_mistral3 as hf
from transformers.models.pixtral import modeling_pixtral as pixtral

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

FAMILY = "mistral3"
MODEL_TYPES = ("mistral3",)
#: the llava wrapper's paths (CLIP's names inside its tower match nothing here), Pixtral's names inside the tower
RENAME = {**LLAVA_RENAME, **PIXTRAL_RENAME}
Mistral3Vision = pixtral_tower("Mistral3Vision")
ENVOYS = {mistral.MistralDecoderLayer: Block, mistral.MistralAttention: Attention, mistral.MistralMLP: MLP,
          pixtral.PixtralVisionModel: Mistral3Vision, pixtral.PixtralAttentionLayer: TowerBlock,
          pixtral.PixtralAttention: PixtralAttention, pixtral.PixtralMLP: TowerGatedMLP}
ROOT = host("Mistral3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.Mistral3ForConditionalGeneration)

#: the standard paths of the tower and projector (image-text-to-text only)
VISION_PATHS = ["vision", "projector", "vision.patch_conv", "vision.ln_pre", "vision.layers.0.input_layernorm",
                "vision.layers.0.post_attention_layernorm", "vision.layers.0.self_attn.o_proj",
                "vision.layers.0.mlp.gate_proj", "vision.layers.0.mlp.down_proj", "projector.norm",
                "projector.patch_merger", "projector.linear_fc1", "projector.act_fn", "projector.down_proj"]


def required_paths(model: Any) -> list[str]:
    return [*TEXT_PATHS, *VISION_PATHS] if model.task == "image-text-to-text" else list(TEXT_PATHS)
