"""LLaVA-NeXT (LlavaNextForConditionalGeneration, model_type llava_next): LLaVA-1.5's tower and projector reading
each image as AnyRes tiles, packed into a Mistral (or Llama) decoder's image tokens.

The wrapper (``model.model`` a LlavaNextModel) holds a CLIP vision tower (``model.vision_tower`` -> ``vision``),
LLaVA-1.5's two-layer MLP projector (``model.multi_modal_projector`` -> ``projector``), a learned
``image_newline`` and the text model (``model.language_model``: Mistral's decoder on llava-v1.6-mistral-7b-hf,
whose blocks, attention and MLP are the mistral family's hosts). It is the shared vision line
(`nncanon.parts.vision.vision_line`) with a CLIP tower (`nncanon.parts.vision.vision_towers.clip_tower`), read as AnyRes
tiles (`nncanon.parts.vision.anyres`):

- the processor makes each image a base tile (the whole image resized and cropped to ``image_size``) and the
  tiles of a grid (the image resized, aspect kept, into the best ``image_grid_pinpoints`` resolution, padded
  to it, cut into ``image_size`` squares), and hands ``image_sizes`` (each image's height and width) beside them;
- the tower runs every tile on its own row, ``[tiles, 1 + patches, width]`` (``vision.patch_embeddings``): the
  class token, learned positions, ``pre_layrnorm``, pre-norm LayerNorm blocks over the whole tile with no mask;
- the features are read at ``vision_feature_layer`` (-2), the class token dropped under "default"
  (``vision.tower_output``), and the projector maps each tile's patches to ``vision.tile_features``;
- each image's tiles are packed (``vision.image_features``): the base tile's features, then the grid's laid on
  one feature grid with the padding's rows or columns cut off and ``image_newline`` after every row; they are
  scattered at the prompt's image tokens (``vision.image_token_mask``), so an image's token count depends on its
  size and aspect.

Inside the tower, CLIP's names map onto the standard ones as on llava. task="text-generation" (the default) loads
the wrapper without its tower and projector; "image-text-to-text" with its processor.
"""

from __future__ import annotations

import sys

from transformers.models.clip import modeling_clip as clip
from transformers.models.llama import modeling_llama as llama
from transformers.models.llava_next import modeling_llava_next as hf
from transformers.models.mistral import modeling_mistral as mistral

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import pick
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, Block
from ..parts.blocks.mlp import MLP
from ..parts.vision.anyres import PACKED, TILES, image_sizes, tile_features_value  # noqa: F401 (image_sizes: the family API)
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_line import install_sources as prepare  # noqa: F401 (the family API: the .source op image_features reads)
from ..parts.vision.vision_towers import (  # noqa: F401 (the family API)
    LLAVA_RENAME,
    TOWER_RELATIONS,
    TowerAttention,
    TowerBlock,
    TowerMLP,
    clip_tower,
    example_images,
    llava_required_paths,
    tower_build,
    trace_inputs,
)
from .mistral import (
    MistralAttention,
    layer_types,  # noqa: F401 (the family API: sliding_attention when the text config sets a window)
)

FAMILY = "llava_next"
MODEL_TYPES = ("llava_next",)
RENAME = LLAVA_RENAME

#: llava's tower relations less its projector's (image_features is the packing here, not the projector's output)
_FLAT_PROJECTOR = pick(TOWER_RELATIONS, "image_features == projector(")
LlavaNextVision = host("LlavaNextVision", clip_tower("LlavaNextClipTower"), values=[tile_features_value()],
                       HOST="model.vision",
                       RELATIONS=(*(r for r in TOWER_RELATIONS if r is not _FLAT_PROJECTOR), TILES, PACKED))

# Mistral's hosts for llava-v1.6-mistral-7b-hf (the tiny checkpoint's); the Vicuna and Yi lines' Llama text
# model gets Llama's, as llava's does
ENVOYS = {mistral.MistralDecoderLayer: Block, mistral.MistralAttention: MistralAttention, mistral.MistralMLP: MLP,
          llama.LlamaDecoderLayer: Block, llama.LlamaAttention: Attention, llama.LlamaMLP: MLP,
          clip.CLIPVisionModel: LlavaNextVision, clip.CLIPEncoderLayer: TowerBlock, clip.CLIPAttention: TowerAttention,
          clip.CLIPMLP: TowerMLP}
ROOT = host("LlavaNextStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.LlavaNextForConditionalGeneration)

required_paths = llava_required_paths("vision.pre_layrnorm")
