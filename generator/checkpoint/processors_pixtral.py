"""Mistral 3's tiny processor: Pixtral's over ``PixtralImageProcessorPil`` (no torchvision:
`nncanon.parts.vision.pixtral_processing.PixtralImageTextProcessor`).

Every image is resized, aspect kept, so its longest edge is at most ``longest_edge`` pixels and each side a
multiple of the patch, and the batch padded to its largest image (the model crops each image back by
``image_sizes``); each ``[IMG]`` of the prompt becomes a row of ``[IMG]`` per merged square of the image's patch
grid, each row closed by ``[IMG_BREAK]``, the last by ``[IMG_END]``.
"""

from __future__ import annotations

from typing import Any


def pixtral_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """The processor for ``tiny.processor`` (``kind: pixtral``): ``longest_edge``, ``patch_size`` (the tower's) and
    ``spatial_merge_size`` (the projector's)."""
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    from nncanon.parts.vision.pixtral_processing import PixtralImageTextProcessor

    recipe = fam.tiny["processor"]
    patch = recipe["patch_size"]
    image_processor = PixtralImageProcessorPil(size={"longest_edge": recipe["longest_edge"]},
                                               patch_size={"height": patch, "width": patch})
    return PixtralImageTextProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=patch,
                            spatial_merge_size=recipe["spatial_merge_size"], chat_template=template)
