"""Aya Vision (AyaVisionForConditionalGeneration, model_type aya_vision): Command R7B's Cohere 2 decoder reading a
SigLIP tower over an image's tiles through a pixel-shuffle SwiGLU projector.

The wrapper (``model.model`` an AyaVisionModel) holds a SigLIP tower (``model.vision_tower`` -> ``vision``, a
SiglipVisionModel), the projector (``model.multi_modal_projector`` -> ``projector``: layernorm -> ``norm``,
linear_1 -> ``linear_fc1``, act -> ``act_fn``, linear_2 -> ``down_proj``) and the text model
(``model.language_model``, Cohere 2's decoder: its parallel block off one weight-only LayerNorm, three
sliding-window rotary blocks to every full NoPE one, `nncanon.families.cohere2`'s hosts unchanged). It is the shared
vision line (`nncanon.parts.vision.vision_line`) with a SigLIP tower (`nncanon.parts.vision.vision_towers`):

- the processor cuts each image into tiles of the tower's image_size (the grid closest to the image's aspect, at
  most max_patches tiles) and, when there is more than one, adds the whole image shrunk to one tile; each tile is
  one row of the tower's batch (``[tiles, patches, width]``, no class token);
- the projector reads the hidden state at ``vision_feature_layer`` (-1: the last block's output, *before*
  ``post_layernorm``, which runs but nothing reads; strategy "full" keeps every patch: ``vision.tower_output``);
- inside the projector each 2 x 2 square of a tile's patch grid is one row (`nncanon.parts.vision.pixel_shuffle`),
  LayerNormed, then a SwiGLU whose value and gate are the two halves of linear_1, then linear_2: one image token per
  square (``vision.image_features``), scattered at the prompt's ``<|IMG_PATCH|>`` tokens.

The head is tied. Before transformers 5.25 the wrapper, unlike Cohere2ForCausalLM, does not multiply its logits by
the text config's ``logit_scale`` (``logits == lm_head_output``); from 5.25 it does, as Cohere 2 does (`SCALES_LOGITS`
reads which from the installed wrapper's forward, and the root's relation and the lens follow it). task="text-generation" (the default) loads the wrapper without its
tower and projector; "image-text-to-text" with its processor (AyaVisionProcessor).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from transformers.models.aya_vision import modeling_aya_vision as hf
from transformers.models.cohere2 import modeling_cohere2 as cohere2
from transformers.models.siglip import modeling_siglip as siglip

from ..core.hosts import host
from ..core.model import StandardModel
from ..core.relations import relation
from ..core.values import Value
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.blocks.norms import final_norm_relation
from ..parts.blocks.parallel import parallel_block
from ..parts.blocks.text_family import root_relations
from ..parts.vision.pixel_shuffle import SHUFFLED_SWIGLU_PROJECTOR
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.vision_line import EMBEDDINGS_OFF_IMAGES, FLAT, AtRoot, image_features_value, replace
from ..parts.vision.vision_line import install_sources as prepare  # noqa: F401 (the family API: the .source op image_features reads)
from ..parts.vision.vision_towers import (  # noqa: F401 (the family API)
    LLAVA_RENAME,
    TowerAttention,
    TowerBlock,
    TowerFeatures,
    TowerMLP,
    _feature,
    example_images,
    siglip_tower,
    tower_build,
    trace_inputs,
)
from ..parts.vision.vision_towers import image_sizes as _tower_image_sizes
from .cohere2 import SlidingRotaryAttention

FAMILY = "aya_vision"
MODEL_TYPES = ("aya_vision",)
#: the llava wrapper's paths, SigLIP's names inside the tower, the projector's LayerNorm as ``norm``
RENAME = {**LLAVA_RENAME, "layernorm": "norm"}

_TOWER_OUTPUT = Value("tower_output", TowerFeatures,
                      "The tower's output the projector reads: the hidden state at vision_feature_layer (-1: the last "
                      "block's output, before post_layernorm), every patch (strategy \"full\")",
                      AtRoot(io="input", module="model.multi_modal_projector", shown="model.projector", element=0,
                             words="the projector's input, at the root"))
_Tower = siglip_tower("AyaVisionTower", SHUFFLED_SWIGLU_PROJECTOR, image_features_value(view=FLAT))
#: SigLIP's tower read at a hidden state (vision_towers' CLIP relation, no class token under "full"), not post-normed
AyaVisionVision = host("AyaVisionVision", _Tower, values=[_TOWER_OUTPUT], HOST="model.vision",
                       RELATIONS=replace(_Tower.RELATIONS, tower_output=_feature))

ENVOYS = {cohere2.Cohere2DecoderLayer: parallel_block("Cohere 2's block", one_norm=True),
          cohere2.Cohere2Attention: SlidingRotaryAttention, cohere2.Cohere2MLP: MLP,
          siglip.SiglipVisionModel: AyaVisionVision, siglip.SiglipEncoderLayer: TowerBlock,
          siglip.SiglipAttention: TowerAttention, siglip.SiglipMLP: TowerMLP}
#: whether the installed wrapper multiplies its logits by text_config.logit_scale (5.25 and later), read off its
#: forward rather than the release number, so a release that moves it again is followed, not assumed
SCALES_LOGITS = "logit_scale" in inspect.getsource(hf.AyaVisionForConditionalGeneration.forward)


@relation("logits == lm_head_output · text_config.logit_scale (the wrapper scales its logits as Cohere 2 does)",
          proves="logits", reads="lm_head_output logits")
def _scaled_logits(host, r):
    return [(r["lm_head_output"].double() * host._module.config.text_config.logit_scale, r["logits"])]


_ROOT_OWN = {"final_norm_output": final_norm_relation("· weight"),
             **({"logits == lm_head_output": _scaled_logits} if SCALES_LOGITS else {})}
#: Cohere 2's root (the weight-only LayerNorm final norm; the logit scale where the wrapper applies it), the
#: embeddings stated off the image tokens
ROOT = host("AyaVisionStandardModel", StandardModel, values=ROOT_VALUES,
            RELATIONS=replace(root_relations(_ROOT_OWN), token_embeddings=EMBEDDINGS_OFF_IMAGES),
            family_module=sys.modules[__name__])

build = tower_build(hf.AyaVisionForConditionalGeneration)

#: Cohere's text paths (no post_attention_layernorm: one norm serves both sublayers)
ONE_NORM_PATHS = [p for p in TEXT_PATHS if p != "layers.0.post_attention_layernorm"]
#: the standard paths of the tower and projector (image-text-to-text only)
VISION_PATHS = ["vision", "projector", "vision.embeddings", "vision.layers.0.input_layernorm",
                "vision.layers.0.post_attention_layernorm", "vision.layers.0.self_attn.o_proj",
                "vision.layers.0.mlp.linear_fc1", "vision.layers.0.mlp.act_fn", "vision.layers.0.mlp.down_proj",
                "vision.post_layernorm", "projector.norm", "projector.linear_fc1", "projector.act_fn",
                "projector.down_proj"]


def required_paths(model: Any) -> list[str]:
    return [*ONE_NORM_PATHS, *VISION_PATHS] if model.task == "image-text-to-text" else list(ONE_NORM_PATHS)


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The tower's sizes (`vision_towers.image_sizes`: ``images`` the tiles), with ``features`` the rows the projector
    reads per tile: every patch, not the quarter as many image tokens it makes of them."""
    sizes = _tower_image_sizes(model, args, kwargs)
    return {**sizes, "features": sizes["patches"]}


def past_the_head(model: StandardModel, logits):
    """The lens's step past the head (`nncanon.lens`): text_config.logit_scale where the wrapper applies it."""
    return logits * model._module.config.text_config.logit_scale if SCALES_LOGITS else logits
