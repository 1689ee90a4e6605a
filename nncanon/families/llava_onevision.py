"""LLaVA-OneVision (LlavaOnevisionForConditionalGeneration, model_type llava_onevision): a SigLIP tower reading
each image as AnyRes tiles, a large grid pooled down to about N tiles' worth, packed into a Qwen2 decoder's image
tokens.

The wrapper (``model.model`` a LlavaOnevisionModel) holds a SigLIP vision tower (``model.vision_tower`` ->
``vision``, a SiglipVisionModel cut to 26 blocks on the llava-hf checkpoints), LLaVA-1.5's two-layer MLP
projector (``model.multi_modal_projector`` -> ``projector``), a learned ``image_newline`` and the text model
(``model.language_model``: Qwen2's decoder, whose blocks, attention and MLP are the qwen2 family's hosts). It is
the shared vision line (`nncanon.parts.vision.vision_line`) with the tower and packing of `nncanon.parts.vision.onevision`,
over AnyRes (`nncanon.parts.vision.anyres`):

- the processor makes each image a base tile (the whole image resized to ``image_size``, not cropped) and the
  tiles of a grid (the image resized, aspect kept, into the best ``image_grid_pinpoints`` resolution, padded to
  it, cut into ``image_size`` squares), and hands ``image_sizes`` and ``batch_num_images`` (each prompt's image
  count) beside them;
- the tower runs every tile on its own row, ``[tiles, patches, width]`` (``vision.patch_embeddings``): no class
  token, a learned position per patch, no norm before the pre-norm LayerNorm blocks, no mask;
- the features are the hidden state at ``vision_feature_layer`` (-1: the last block's output; ``post_layernorm``
  is run and not read), every patch kept under the "full" strategy (``vision.tower_output``), and the projector
  maps each tile's patches to ``vision.tile_features``;
- each image's tiles are packed (``vision.image_features``): the base tile's features, then the grid's laid on one
  feature grid with the padding's rows or columns cut off, bilinearly resized down when it holds more than N
  tiles' worth (``vision_aspect_ratio`` "anyres_max_N"), ``image_newline`` after every row; an image that shares
  its prompt with others is its base tile and one newline. They are scattered at the prompt's image tokens
  (``vision.image_token_mask``).

Inside the tower, SigLIP's names map onto the standard ones as on gemma3. task="text-generation" (the default)
loads the wrapper without its tower and projector; "image-text-to-text" with its processor. Videos (the
wrapper's second path, pooled frames) are not served.
"""

from __future__ import annotations

import sys

from transformers.models.llava_onevision import modeling_llava_onevision as hf
from transformers.models.qwen2 import modeling_qwen2 as qwen2
from transformers.models.siglip import modeling_siglip as siglip

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.anyres import image_sizes  # noqa: F401 (the family API)
from ..parts.vision.onevision import onevision_tower
from ..parts.vision.onevision import onevision_trace_inputs as trace_inputs  # noqa: F401 (the family API)
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
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
)

FAMILY = "llava_onevision"
MODEL_TYPES = ("llava_onevision",)
RENAME = LLAVA_RENAME

LlavaOnevisionVision = onevision_tower("LlavaOnevisionVision")
ENVOYS = {qwen2.Qwen2DecoderLayer: Block, qwen2.Qwen2Attention: Attention, qwen2.Qwen2MLP: MLP,
          siglip.SiglipVisionModel: LlavaOnevisionVision, siglip.SiglipEncoderLayer: TowerBlock,
          siglip.SiglipAttention: TowerAttention, siglip.SiglipMLP: TowerMLP}
ROOT = host("LlavaOnevisionStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.LlavaOnevisionForConditionalGeneration)

required_paths = llava_required_paths()
