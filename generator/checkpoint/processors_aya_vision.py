"""Aya Vision's tiny processor: ``AyaVisionProcessor`` over ``GotOcr2ImageProcessorPil`` (no torchvision).

Every image is cut into tiles of ``tile`` pixels (the tower's image_size), the grid whose aspect is closest to the
image's with at most ``max_patches`` tiles, and, when there is more than one tile, the whole image shrunk to one
tile is added last (the global tile); each ``<image>`` of the prompt becomes ``<|START_OF_IMG|>``, per tile
``TILE_k`` and its image tokens (``<|IMG_PATCH|>``, ``(tile / (patch_size · downsample_factor))²`` of them), then
``TILE_GLOBAL``, the global tile's and ``<|END_OF_IMG|>``.
"""

from __future__ import annotations

from typing import Any


def aya_vision_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """The processor for ``tiny.processor`` (``kind: aya_vision``): ``tile``, ``max_patches``, ``patch_size`` and
    ``downsample_factor`` (the tower's patch and the connector's fold)."""
    from transformers import AyaVisionProcessor, GotOcr2ImageProcessorPil

    recipe = fam.tiny["processor"]
    side = recipe["tile"]
    image_processor = GotOcr2ImageProcessorPil(size={"height": side, "width": side}, crop_to_patches=True,
                                               min_patches=1, max_patches=recipe["max_patches"])
    return AyaVisionProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=recipe["patch_size"],
                              img_size=side, downsample_factor=recipe["downsample_factor"], chat_template=template)
