"""Idefics3 (Idefics3ForConditionalGeneration, model_type idefics3): a Llama 3 decoder reading a SigLIP-built tower
through a pixel-shuffle connector, each image split into tiles and a global image.

The wrapper (``model.model`` an Idefics3Model) holds the tower (``model.vision_model`` -> ``vision``, an
Idefics3VisionTransformer), the connector (``model.connector`` -> ``projector``) and the text model
(``model.text_model``, Llama's decoder, whose blocks, attention and MLP are Llama's hosts unchanged). It is the
shared vision line (`nncanon.parts.vision.vision_line`) with a SigLIP-built tower (`nncanon.parts.vision.vision_towers`) and the
pixel-shuffle connector (`nncanon.parts.vision.pixel_shuffle`):

- the processor resizes each image, cuts it into rows x cols square tiles of the tower's image_size and adds the
  whole image shrunk to one tile (the global image); each tile is one row of the tower's batch
  (``[tiles, patches, width]``, the call's tiles of every image one after another), and each ``<image>`` of the
  prompt becomes, per tile, ``<fake_token_around_image><row_r_col_c>`` and its image tokens, then
  ``<fake_token_around_image><global-img>``, the global image's tokens and ``<fake_token_around_image>``;
- the tower's embeddings differ from SigLIP's: built for images of any size padded into one batch, they take a
  ``patch_attention_mask`` (which patches hold pixels) and give each real patch the learned position of the
  bucket its fractional coordinate falls in (patch i of an image n patches high: bucket floor(i / n · side) of
  the side = image_size / patch_size positions a side), padding patches position 0 (``vision.patch_embeddings``,
  proven by that bucketing recomputed here, not by SigLIP's one row per patch); then pre-norm LayerNorm blocks
  and ``post_layernorm`` (``vision.tower_output``, what the connector is called with);
- the connector gathers each scale_factor x scale_factor square of a tile's patch grid into one row and maps it
  with one linear layer to one image token (``vision.image_features``, ``(side / scale_factor)²`` per tile),
  scattered at the prompt's image tokens (``vision.image_token_mask``) by the wrapper's ``inputs_merger``.

task="text-generation" (the default) loads the wrapper without its tower and connector; "image-text-to-text" with
its processor.
"""

from __future__ import annotations

import sys
from typing import Any

from transformers.models.idefics3 import modeling_idefics3 as hf
from transformers.models.llama import modeling_llama as llama

from ..core.hosts import host
from ..core.layouts import ImageFeatures
from ..core.model import StandardModel
from ..core.precision import SUBBLOCK
from ..core.relations import relation
from ..core.values import Value
from ..parts.attention.softmax import Attention
from ..parts.blocks.decoder import ROOT_VALUES, TEXT_PATHS, Block
from ..parts.blocks.decoder import attention_layer_types as layer_types  # noqa: F401 (the family API, shared)
from ..parts.blocks.mlp import MLP
from ..parts.vision.pixel_shuffle import PIXEL_SHUFFLE
from ..parts.vision.qwen_vit.loading import dense_dim_sizes as dim_sizes  # noqa: F401 (the family API, shared)
from ..parts.vision.vision_line import IMAGE_ROOT_RELATIONS, AtRoot, install_sources, replace
from ..parts.vision.vision_towers import (  # noqa: F401 (the family API)
    TOWER_RENAME,
    TowerAttention,
    TowerBlock,
    TowerMLP,
    example_images,
    siglip_tower,
    tower_build,
    trace_inputs,
)

FAMILY = "idefics3"
MODEL_TYPES = ("idefics3",)
RENAME = {
    "model.text_model.embed_tokens": "embed_tokens",
    "model.text_model.layers": "layers",
    "model.text_model.norm": "norm",
    "model.vision_model": "vision",
    "model.connector": "projector",
    **TOWER_RENAME,
}

# -- the tower's embeddings: a learned position per bucket of the patch's fractional coordinate ---------------


def bucketed_positions(mask: Any, side: int) -> Any:
    """``[images, rows · cols]`` position ids of an image's patches, from its ``patch_attention_mask``
    ``[images, rows, cols]`` (which patches hold pixels): a real patch at (i, j) of an image n x m real patches
    gets row bucket floor(i / n · side), column bucket floor(j / m · side) (at most side - 1), position
    row · side + column; a padding patch gets 0. The fraction i / n is formed in float32 as the module forms it
    (i times the float32 step 1 / n, kept below 1) and counted against the float32 boundaries k / side, so a
    coordinate on a boundary lands where the module puts it."""
    import torch

    real_rows, real_cols = mask[:, :, 0].sum(1), mask[:, 0, :].sum(1)
    boundaries = (torch.arange(1, side, dtype=torch.float64) / side).float()  # k / side, rounded once

    def buckets(count: Any, length: int) -> Any:
        fraction = torch.arange(length, dtype=torch.float32)[None] * (1.0 / count.float())[:, None]
        fraction = fraction.clamp(max=1 - 1e-6)
        return (fraction[..., None] >= boundaries).sum(-1)  # how many boundaries lie at or below it

    rows, cols = buckets(real_rows, mask.shape[1]), buckets(real_cols, mask.shape[2])
    positions = rows[:, :, None] * side + cols[:, None, :]
    return torch.where(mask.bool(), positions, 0).flatten(1)


@relation("patch_embeddings == patch_embedding(pixel_values) per patch + position_embedding[bucketed position]: a "
          "real patch at (i, j) of an image n x m real patches takes the position of bucket (floor(i / n · side), "
          "floor(j / m · side)) of the side x side learned grid, a padding patch position 0 (no class token)",
          proves="patch_embeddings", reads="inputs patch_embeddings", tolerance=SUBBLOCK)
def _bucketed_embeddings(host, r):
    """A patch's embedding is a conv of 3·patch² terms, recomputed in float64: SUBBLOCK."""
    import torch
    import torch.nn.functional as F

    embeddings = host.embeddings._module
    conv = embeddings.patch_embedding
    args, kwargs = r["inputs"]
    pixels = (args[0] if args else kwargs["pixel_values"]).double()
    mask = kwargs.get("patch_attention_mask")
    if mask is None:  # the tower called alone: every patch real
        mask = torch.ones(pixels.shape[0], pixels.shape[2] // conv.stride[0], pixels.shape[3] // conv.stride[1],
                          dtype=torch.bool)
    patches = F.conv2d(pixels, conv.weight.double(), None if conv.bias is None else conv.bias.double(),
                       stride=conv.stride).flatten(2).transpose(1, 2)
    positions = bucketed_positions(mask, embeddings.num_patches_per_side)
    return [(patches + embeddings.position_embedding.weight.double()[positions], r["patch_embeddings"])]


def vision_host(name: str, scatter_ops: tuple[str, ...], connector: Any = PIXEL_SHUFFLE, rows: str = "tile") -> type:
    """``model.vision`` of an Idefics-built wrapper whose scatter is at ``scatter_ops`` of ``model.model``'s forward:
    the SigLIP tower's values and relations, the embeddings' bucketed, the ``connector``'s relation (the pixel
    shuffle; Idefics2's perceiver resampler)."""
    features = Value("image_features", ImageFeatures,
                     "The image features the text model receives at the image tokens, flat over them (every "
                     f"{rows}'s tokens, the {rows}s one after another)",
                     AtRoot(io="input", module="model", shown="model.model", ops=scatter_ops, element=1))
    tower = siglip_tower(name, connector, features, projector="model.connector")
    tower.RELATIONS = replace(tower.RELATIONS, patch_embeddings=_bucketed_embeddings)
    return tower


Idefics3Vision = vision_host("Idefics3Vision", ("self_inputs_merger_0", "inputs_embeds_masked_scatter_0"))
ENVOYS = {llama.LlamaDecoderLayer: Block, llama.LlamaAttention: Attention, llama.LlamaMLP: MLP,
          hf.Idefics3VisionTransformer: Idefics3Vision, hf.Idefics3EncoderLayer: TowerBlock,
          hf.Idefics3VisionAttention: TowerAttention, hf.Idefics3VisionMLP: TowerMLP}
ROOT = host("Idefics3StandardModel", StandardModel, values=ROOT_VALUES, RELATIONS=IMAGE_ROOT_RELATIONS,
            family_module=sys.modules[__name__])

build = tower_build(hf.Idefics3ForConditionalGeneration, tower="vision_model", projector="connector")

#: the standard paths of the tower and connector (image-text-to-text only)
VISION_PATHS = ["vision", "projector", "vision.embeddings", "vision.layers.0.input_layernorm",
                "vision.layers.0.post_attention_layernorm", "vision.layers.0.self_attn.o_proj",
                "vision.layers.0.mlp.linear_fc1", "vision.layers.0.mlp.act_fn", "vision.layers.0.mlp.down_proj",
                "vision.post_layernorm", "projector.modality_projection"]


def required_paths(model: Any) -> list[str]:
    return [*TEXT_PATHS, *VISION_PATHS] if model.task == "image-text-to-text" else list(TEXT_PATHS)


def image_sizes(model: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    """The image dimensions of a trace called with ``(args, kwargs)`` (the processor alone, no forward): ``images``
    the tiles the tower runs (every image's tiles and its global image; all-zero padding tiles are dropped by the
    wrapper), ``patches`` each tile's rows, ``features`` the rows the connector reads per tile (every patch),
    ``image_tokens`` what the prompt holds."""
    encoding = model.processor(text=args[0] if args else kwargs["text"], images=kwargs["images"], return_tensors="pt")
    pixels = encoding["pixel_values"].flatten(0, 1)
    images = int((pixels != 0).flatten(1).any(1).sum())
    vision = model.vision
    vision._images_of_call = images
    patches = (pixels.shape[2] // vision.patch_size) * (pixels.shape[3] // vision.patch_size)
    tokens = int((encoding["input_ids"] == model._module.config.image_token_id).sum())
    return {"images": images, "patches": patches, "features": patches, "image_tokens": tokens,
            "vision_hidden_size": vision.vision_hidden_size}


def prepare(model: Any) -> None:
    """The ``.source`` op image_features reads (the wrapper's masked_scatter, in inputs_merger on Idefics3)."""
    install_sources(model)
