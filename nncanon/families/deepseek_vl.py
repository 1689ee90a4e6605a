"""DeepSeek-VL (DeepseekVLForConditionalGeneration, model_type deepseek_vl): a Llama decoder reading a SigLIP
vision tower through a two-layer MLP aligner, one image token per patch.

The wrapper (``model.model`` a DeepseekVLModel) holds a SigLIP tower (``model.vision_model`` -> ``vision``, a
SiglipVisionModel), the aligner (``model.aligner`` -> ``projector``: linear1 -> ``linear_fc1``, GELU activation ->
``act_fn``, linear2 -> ``down_proj``) and the text model (``model.language_model``, Llama's decoder, whose blocks,
attention and MLP are Llama's hosts unchanged). It is the shared vision line (`nncanon.parts.vision.vision_line`)
with a SigLIP tower (`nncanon.parts.vision.vision_towers.siglip_tower`):

- the processor shrinks each image until its longest side is the tower's image_size and pads it to a square with the
  mean colour; each image is one row of the tower's batch (``[images, patches, width]``, no class token), learned
  positions added to the patch embeddings (``vision.patch_embeddings``), pre-norm LayerNorm blocks with no mask;
- the aligner reads the tower's last_hidden_state, the last block's output through ``post_layernorm``
  (``vision.tower_output``; SigLIP's attention-pooling head, where the checkpoint has one, runs on it but nothing
  reads its output), and maps each patch with two linears around a GELU to one image token
  (``vision.image_features``), scattered at the prompt's ``<image_placeholder>`` tokens (``num_image_tokens`` per
  image: every patch).

The head is tied. task="text-generation" (the default) loads the wrapper without its tower and aligner;
"image-text-to-text" with its processor (DeepseekVLProcessor).
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.deepseek_vl import modeling_deepseek_vl as hf
from transformers.models.llama import modeling_llama as llama
from transformers.models.siglip import modeling_siglip as siglip

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
    TOWER_RENAME,
    TowerAttention,
    TowerBlock,
    TowerMLP,
    _projector,
    example_images,
    llava_required_paths,
    siglip_tower,
    tower_build,
    trace_inputs,
)
from ..parts.vision.vision_towers import image_sizes as _tower_image_sizes

FAMILY = "deepseek_vl"
MODEL_TYPES = ("deepseek_vl",)
#: the wrapper's paths, SigLIP's names inside the tower, the aligner's by the projector's standard names
RENAME = {
    "model.language_model.embed_tokens": "embed_tokens",
    "model.language_model.layers": "layers",
    "model.language_model.norm": "norm",
    "model.vision_model": "vision",
    "model.aligner": "projector",
    **TOWER_RENAME,
    "linear1": "linear_fc1",
    "activation": "act_fn",
    "linear2": "down_proj",
}
DeepseekVLVision = siglip_tower("DeepseekVLVision", _projector, projector="model.aligner")
#: SigLIP's MLP by its path, not its class: the attention-pooling head holds a SiglipMLP too, whose output nothing
#: reads (the aligner reads the post-normed last block), and which no block value describes
ENVOYS = {llama.LlamaDecoderLayer: Block, llama.LlamaAttention: Attention, llama.LlamaMLP: MLP,
          siglip.SiglipVisionModel: DeepseekVLVision, siglip.SiglipEncoderLayer: TowerBlock,
          siglip.SiglipAttention: TowerAttention, "encoder.layers.*.mlp": TowerMLP}
ROOT = host("DeepseekVLStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.DeepseekVLForConditionalGeneration, tower="vision_model", projector="aligner")

#: the llava line's paths of the tower and projector, and SigLIP's embeddings and post_layernorm
required_paths = llava_required_paths("vision.embeddings", "vision.post_layernorm")


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The tower's sizes (`vision_towers.image_sizes`), ``features`` every patch of an image (no class token)."""
    sizes = _tower_image_sizes(model, args, kwargs)
    return {**sizes, "features": sizes["patches"]}
