"""LLaVA (LlavaForConditionalGeneration, model_type llava): a Llama decoder reading a CLIP vision tower.

The wrapper (``model.model`` a LlavaModel) holds a CLIP vision tower (``model.vision_tower`` ->
``vision``, a CLIPVisionModel), a two-layer MLP projector (``model.multi_modal_projector`` ->
``projector``: linear_1, GELU, linear_2) and the text model (``model.language_model``, Llama's
decoder, whose blocks, attention and MLP are Llama's hosts unchanged). It is the shared vision line
(`nncanon.parts.vision.vision_line`) with a CLIP tower:

- the tower runs each image on its own row, ``[images, 1 + patches, width]``: the embeddings module
  prepends the class token to the patch embeddings and adds the learned positions
  (``vision.patch_embeddings``), ``pre_layrnorm`` norms them, then the encoder's pre-norm LayerNorm
  blocks (QuickGELU MLP) attend over the whole image with no mask;
- the features are read at ``vision_feature_layer`` (-2 on LLaVA-1.5: the stream leaving the
  second-to-last block; the last block runs but nothing reads it) and
  ``vision_feature_select_strategy`` "default" drops the class token (``vision.tower_output``: what
  the projector is called with);
- the projector maps each patch to one image token (``vision.image_features``), scattered at the
  prompt's image tokens (``vision.image_token_mask``) into the text embeddings.

Inside the tower, CLIP's names map onto the standard ones (layer_norm1 -> input_layernorm, layer_norm2
-> post_attention_layernorm, out_proj -> o_proj, fc1 / activation_fn / fc2 -> linear_fc1 / act_fn /
down_proj, as on the Qwen ViT), and so do the projector's (linear_1 / act / linear_2). task="text-generation"
(the default) loads the wrapper without its tower and projector; "image-text-to-text" with its processor.
"""

from __future__ import annotations

import sys

from transformers.models.clip import modeling_clip as clip
from transformers.models.llama import modeling_llama as llama
from transformers.models.llava import modeling_llava as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_line import install_sources as prepare  # noqa: F401 (the family API: the .source op image_features reads)
from ..parts.vision.vision_towers import (  # noqa: F401 (the family API)
    LLAVA_RENAME,
    TowerAttention,
    TowerBlock,
    TowerMLP,
    clip_tower,
    example_images,
    image_sizes,
    llava_required_paths,
    tower_build,
    trace_inputs,
)

FAMILY = "llava"
MODEL_TYPES = ("llava",)
RENAME = LLAVA_RENAME
LlavaVision = clip_tower("LlavaVision")
ENVOYS = {llama.LlamaDecoderLayer: Block, llama.LlamaAttention: Attention, llama.LlamaMLP: MLP,
          clip.CLIPVisionModel: LlavaVision, clip.CLIPEncoderLayer: TowerBlock, clip.CLIPAttention: TowerAttention,
          clip.CLIPMLP: TowerMLP}
ROOT = host("LlavaStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.LlavaForConditionalGeneration)

required_paths = llava_required_paths("vision.pre_layrnorm")
