"""GOT-OCR 2.0 (GotOcr2ForConditionalGeneration, model_type got_ocr2): a Qwen2 decoder reading a page through a
SAM-style vision encoder, a ViTDet tower whose stream stays on the patch grid.

The wrapper (``model.model`` a GotOcr2Model) holds the tower (``model.vision_tower`` -> ``vision``, a
GotOcr2VisionEncoder), the projector (``model.multi_modal_projector`` -> ``projector``) and the text model
(``model.language_model``, Qwen2's decoder: Llama's blocks with biased q, k, v projections, whose hosts are
Llama's). The tower and projector are `nncanon.parts.vision.sam`:

- the processor resizes every image to the tower's one square size; the tower embeds it as a grid of patches
  (``vision.patch_embeddings``, served one row per cell), adds a learned position per cell, and runs pre-norm
  blocks whose attention covers 14 x 14 windows (the whole grid on four of them, ``global_attn_indexes``) with a
  decomposed relative position bias; a neck of two convolutions narrows it to ``output_channels``
  (``vision.tower_output``);
- the projector quarters each side of the grid twice with stride-2 convolutions, reaching the text width, and maps
  each cell with a linear: a fixed count of image tokens per page (``vision.image_features``), scattered at the
  prompt's ``<imgpad>`` tokens (``vision.image_token_mask``) between ``<img>`` and ``</img>``.

The tower's blocks are not served (a grid stream, windows batched on their own): the relations prove the neck's
output from the patch embeddings block by block. task="text-generation" (the default) loads the wrapper without its
tower and projector; "image-text-to-text" with its processor.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.got_ocr2 import modeling_got_ocr2 as hf
from transformers.models.qwen2 import modeling_qwen2 as qwen2

from ..core.hosts import host
from ..core.layouts import Patches
from ..core.locators import child
from ..core.model import StandardModel
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.sam import CHANNELS_FIRST, EMBEDDINGS, GRID, PROJECTOR, TOWER, NeckFeatures
from ..parts.vision.vision_line import (
    FLAT,
    IMAGE_ROOT_RELATIONS,
    MASK,
    SCATTER,
    AtRoot,
    image_features_value,
    image_token_mask_value,
)
from ..parts.vision.vision_line import install_sources as prepare  # noqa: F401 (the family API: the .source op image_features reads)
from ..parts.vision.vision_towers import LLAVA_RENAME, _TowerSizes, example_images, tower_build, trace_inputs  # noqa: F401 (the family API)
from ..parts.vision.vision_towers import image_sizes as tower_image_sizes

FAMILY = "got_ocr2"
MODEL_TYPES = ("got_ocr2",)
RENAME = {k: v for k, v in LLAVA_RENAME.items() if k.startswith("model.")}


class SamSizes(_TowerSizes):
    """The tower's sizes, and the neck's width."""

    @property
    def intermediate_size(self) -> int:
        return self._vision_config.mlp_dim

    @property
    def neck_channels(self) -> int:
        return self._vision_config.output_channels

    def dim_sizes(self, patches: int | None = None) -> dict[str, int]:
        return {**_TowerSizes.dim_sizes(self, patches), "neck_channels": self.neck_channels}


_VALUES = [
    image_token_mask_value(),
    Value("patch_embeddings", Patches, "The patch embedding's output, one row per grid cell (row-major), before the "
          "positions are added", child("patch_embed"), view=GRID),
    Value("tower_output", NeckFeatures, "The neck's output the projector reads, one row per grid cell (row-major), "
          "output_channels wide", AtRoot(io="input", module="model.multi_modal_projector", shown="model.projector",
                                         element=0, words="the projector's input, at the root"), view=CHANNELS_FIRST),
    image_features_value(view=FLAT),
]
GotOcr2Vision = type("GotOcr2Vision", (SamSizes, host("GotOcr2Vision", values=_VALUES, HOST="model.vision")),
                     {"HOST": "model.vision", "class_tokens": 0,
                      "RELATIONS": (MASK, SCATTER, EMBEDDINGS, TOWER, PROJECTOR)})
ENVOYS = {qwen2.Qwen2DecoderLayer: Block, qwen2.Qwen2Attention: Attention, qwen2.Qwen2MLP: MLP,
          hf.GotOcr2VisionEncoder: GotOcr2Vision}
ROOT = host("GotOcr2StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.GotOcr2ForConditionalGeneration)

VISION_PATHS = ["vision", "projector", "vision.patch_embed", "vision.neck", "projector.conv_upsampler1",
                "projector.conv_upsampler2", "projector.multimodal_projector"]


def required_paths(model: Any) -> list[str]:
    return [*TEXT_PATHS, *VISION_PATHS] if model.task == "image-text-to-text" else list(TEXT_PATHS)


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """A batched tower's image dimensions (`vision_towers.image_sizes`), ``features`` the neck's cells (one per grid
    cell, not per image token) and ``neck_channels`` its width."""
    sizes = tower_image_sizes(model, args, kwargs)
    return {**sizes, "features": sizes["patches"], "neck_channels": model.vision.neck_channels}
