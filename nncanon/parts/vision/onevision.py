"""LLaVA-OneVision's vision line: a SigLIP tower read at a hidden state (no post_layernorm), AnyRes tiles packed
with ``anyres_max_N`` pooling.

OneVision's wrapper calls its SigLIP tower for every hidden state and reads ``hidden_states[vision_feature_layer]``
(-1 on every llava-hf checkpoint: the last block's output, the checkpoint's tower already cut one block short of
SigLIP-so400m's 27), so ``post_layernorm`` is run but never read: the feature relation is the CLIP towers'
(`vision_towers._feature`: the hidden state at vision_feature_layer, nothing dropped under the "full" strategy),
while the embeddings and the stack are SigLIP's (no class token, no norm before the blocks). The projector is
LLaVA-1.5's two linears (`anyres.TILES`), and the packing is AnyRes's (`anyres.pack`) with OneVision's two steps:
a kept grid of more than N tiles' worth of features is bilinearly resized down (`POOLED_PACKED`), and an image that
shares its prompt with others (``batch_num_images`` > 1) is its base tile and one newline.
"""

from __future__ import annotations

from typing import Any

from ...core.hosts import host
from ...core.layouts import Patches
from ...core.locators import child
from ...core.precision import SUBBLOCK, U32, gamma
from ...core.relations import relation
from ...core.values import Value
from .anyres import TILES, image_sizes_of, pack, tile_features_value
from .vision_line import MASK, SCATTER, AtRoot, image_features_value, image_token_mask_value
from .vision_towers import TowerFeatures, _feature, _siglip_embeddings, _siglip_stack, _TowerSizes

#: the largest feature-grid side (the widest pinpoint over patch_size) POOLED_PACKED's tolerance is stated for
POOL_ROWS = 100


def pool_bound(rows: int = POOL_ROWS) -> float:
    """The float32 error of the wrapper's bilinear resize (F.interpolate, align_corners=False) against a float64
    recomputation, relative to the features' scale: each output's source coordinate (i + 0.5) · in / out - 0.5 is
    three roundings of a number up to ``rows``, off by <= 3 · u · rows; a weight moves by that much and multiplies
    a difference of two neighbours (<= 2 · scale), on each of the two axes: 12 · u · rows; the two lerps
    themselves are a chain of 4 roundings: 2 · gamma(4)."""
    return 12 * U32 * rows + 2 * gamma(4)


#: the tolerance POOLED_PACKED states: pool_bound at POOL_ROWS (7.2e-5), under SUBBLOCK's 1e-4
assert pool_bound() <= SUBBLOCK


@relation("image_features == per image (image_sizes, batch_num_images): tile_features of its base tile; alone in "
          "its prompt, then its grid's tiles laid on one feature grid, the padded rows or columns cut off, bilinearly "
          "resized to about N tiles' worth under anyres_max_N, image_newline after every row, row by row (in a "
          "prompt of several images, one image_newline); the images one after another",
          proves="image_features", reads="model.inputs tile_features image_features", tolerance=SUBBLOCK)
def POOLED_PACKED(host, r):
    """`anyres.pack` recomputes the pooling in float64 from its own bilinear weights: within `pool_bound` of the
    wrapper's float32 F.interpolate (the tiny recipe's grids are far under POOL_ROWS rows)."""
    model = host._std_model
    config = model._module.config
    side = max(max(point) for point in config.image_grid_pinpoints) // config.vision_config.patch_size
    if side > POOL_ROWS:
        raise ValueError(f"a feature grid {side} wide: the pooling tolerance is stated for grids up to {POOL_ROWS}")
    inputs = r["model.inputs"]
    return [(pack(model._module.config, r["tile_features"], image_sizes_of(inputs), model._module.model.image_newline,
                  inputs[1].get("batch_num_images")), r["image_features"])]


def onevision_tower(name: str, projector: str = "model.multi_modal_projector") -> type:
    """``model.vision`` of a OneVision wrapper: a SigLIP tower read at vision_feature_layer, its tiles projected
    (``tile_features``) and packed (``image_features``)."""
    values = [
        image_token_mask_value(),
        Value("patch_embeddings", Patches,
              "The embeddings module's output: each patch's embedding, positions added (no class token)",
              child("embeddings")),
        Value("tower_output", TowerFeatures,
              "The tower's output the projector reads: the hidden state at vision_feature_layer (every patch; "
              "post_layernorm is not read)", AtRoot(io="input", module=projector, shown="model.projector", element=0,
                                                    words="the projector's input, at the root")),
        image_features_value(),
        tile_features_value(projector),
    ]
    relations = (MASK, SCATTER, _siglip_embeddings, _siglip_stack, _feature, TILES, POOLED_PACKED)
    return type(name, (_TowerSizes, host(name, values=values, HOST="model.vision")),
                {"HOST": "model.vision", "RELATIONS": relations, "class_tokens": 0})


def onevision_trace_inputs(model: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of ``model.trace``: two prompts, one example image each (so ``batch_num_images`` is
    [1, 1] and both are tiled: a prompt of several images would read each as its base tile alone)."""
    from .vision_towers import example_images

    pad = model.processor.image_token
    return ([f"Is {pad} red?", f"Is {pad} noise or red?"],), {"images": example_images(model.processor),
                                                                 "padding": True}


__all__ = ["POOL_ROWS", "pool_bound", "POOLED_PACKED", "onevision_tower", "onevision_trace_inputs"]
