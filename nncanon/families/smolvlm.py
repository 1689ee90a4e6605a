"""SmolVLM (SmolVLMForConditionalGeneration, model_type smolvlm): Idefics3's architecture under its own names.

SmolVLM2 is Idefics3 (`nncanon.families.idefics3`) with a SmolLM2 text model (Llama's decoder) and a smaller
SigLIP-built tower: the same tile splitting, the same bucketed positions in the tower's embeddings, the same
pixel-shuffle connector (`nncanon.parts.vision.pixel_shuffle`, scale_factor 4 on SmolVLM2: sixteen patches per image
token). The modules are SmolVLM's classes with Idefics3's code, and the wrapper writes the scatter in its own
forward (``inputs_embeds.masked_scatter``) rather than in an ``inputs_merger`` method, so only the hosts' classes
and where ``vision.image_features`` is read differ; every host, relation and size is idefics3's.

task="text-generation" (the default) loads the wrapper without its tower and connector; "image-text-to-text" with
its processor.
"""

from __future__ import annotations

import sys

from transformers.models.llama import modeling_llama as llama
from transformers.models.smolvlm import modeling_smolvlm as hf

from ..core.hosts import host
from ..core.model import StandardModel
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, Block
from ..parts.blocks.mlp import MLP
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS
from ..parts.vision.vision_towers import TowerAttention, TowerBlock, TowerMLP, tower_build
from .idefics3 import (  # noqa: F401 (the family API, shared with idefics3)
    RENAME,
    dim_sizes,
    example_images,
    image_sizes,
    layer_types,
    prepare,
    required_paths,
    trace_inputs,
    vision_host,
)

FAMILY = "smolvlm"
MODEL_TYPES = ("smolvlm",)

SmolVLMVision = vision_host("SmolVLMVision", ("inputs_embeds_masked_scatter_0",))
ENVOYS = {llama.LlamaDecoderLayer: Block, llama.LlamaAttention: Attention, llama.LlamaMLP: MLP,
          hf.SmolVLMVisionTransformer: SmolVLMVision, hf.SmolVLMEncoderLayer: TowerBlock,
          hf.SmolVLMVisionAttention: TowerAttention, hf.SmolVLMVisionMLP: TowerMLP}
ROOT = host("SmolVLMStandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.SmolVLMForConditionalGeneration, tower="vision_model", projector="connector")
