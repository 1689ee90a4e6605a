"""Idefics2 (Idefics2ForConditionalGeneration, model_type idefics2): a Mistral decoder reading a SigLIP-built tower
through a perceiver resampler, each image at its own aspect, padded into one batch.

The wrapper (``model.model`` an Idefics2Model) holds the tower (``model.vision_model`` -> ``vision``, an
Idefics2VisionTransformer), the connector (``model.connector`` -> ``projector``) and the text model
(``model.text_model``, Mistral's decoder: Llama's blocks with the sliding window Mistral's attention host states).
It is Idefics3's line (`nncanon.families.idefics3`: the same tower, its positions bucketed) with two mechanisms of
its own:

- the processor keeps each image's aspect (resized between a shortest and a longest edge) and pads the call's
  images at the bottom and right to one size; the wrapper marks each patch real when all its pixels are
  (``patch_attention_mask``), the embeddings bucket the real patches' positions over the image's own grid, and the
  tower's attention masks the padding patches out as keys (`nncanon.parts.vision.padded_patches`);
- the connector is a perceiver resampler (`nncanon.parts.vision.perceiver`): a gated MLP maps the tower's output
  (``vision.tower_output``) to the text width, then ``resampler_n_latents`` learned latents read it through a few
  cross-attention layers and a final RMSNorm: that many image tokens per image whatever its size
  (``vision.image_features``), each ``<image>`` of the prompt becoming ``<fake_token_around_image>``, as many
  ``<image>`` tokens and ``<fake_token_around_image>``; the wrapper's ``inputs_merger`` scatters them there
  (``vision.image_token_mask``).

task="text-generation" (the default) loads the wrapper without its tower and connector; "image-text-to-text" with
its processor.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.idefics2 import modeling_idefics2 as hf
from transformers.models.mistral import modeling_mistral as mistral

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.mlp import MLP
from ..parts.vision.padded_patches import MaskedTowerAttention
from ..parts.vision.perceiver import PERCEIVER
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_towers import TowerBlock, TowerMLP, tower_build
from .idefics3 import (  # noqa: F401 (the family API, shared with idefics3)
    RENAME,
    dim_sizes,
    example_images,
    image_sizes,
    prepare,
    trace_inputs,
    vision_host,
)
from .idefics3 import VISION_PATHS as IDEFICS3_VISION_PATHS
from .mistral import MistralAttention
from .mistral import layer_types as layer_types  # noqa: F401 (the family API, shared with mistral)

FAMILY = "idefics2"
MODEL_TYPES = ("idefics2",)

Idefics2Vision = vision_host("Idefics2Vision", ("self_inputs_merger_0", "inputs_embeds_masked_scatter_0"),
                             connector=PERCEIVER, rows="image")
ENVOYS = {mistral.MistralDecoderLayer: Block, mistral.MistralAttention: MistralAttention, mistral.MistralMLP: MLP,
          hf.Idefics2VisionTransformer: Idefics2Vision, hf.Idefics2EncoderLayer: TowerBlock,
          hf.Idefics2VisionAttention: MaskedTowerAttention, hf.Idefics2VisionMLP: TowerMLP}
ROOT = host("Idefics2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.Idefics2ForConditionalGeneration, tower="vision_model", projector="connector")

#: the standard paths of the tower and connector (image-text-to-text only): Idefics3's, the resampler's beside them
VISION_PATHS = [*IDEFICS3_VISION_PATHS, "projector.perceiver_resampler"]


def required_paths(model: Any) -> list[str]:
    return [*TEXT_PATHS, *VISION_PATHS] if model.task == "image-text-to-text" else list(TEXT_PATHS)
