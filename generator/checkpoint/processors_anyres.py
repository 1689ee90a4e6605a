"""The processor recipes of the AnyRes vision lines (LLaVA-NeXT, LLaVA-OneVision): tiles at a grid pinpoint.

An AnyRes processor sends every image to the tower as tiles: the image resized to the tower's one size (the
base tile), then the image resized into the best of ``image_grid_pinpoints`` (aspect kept, padded to it) and
cut into image_size tiles. It expands each ``<image>`` to the tokens the model packs from them (the base
tile's patches, then the grid's, its padding cut off, a newline per row), which only image_sizes (the
original height and width, handed to the model) lets the model recompute.
"""

from __future__ import annotations

from typing import Any


def llava_next_processor(fam: Any, tokenizer: Any, chat_template: str | None):
    """``LlavaNextProcessor`` over ``LlavaNextImageProcessorPil`` (no torchvision): tiles of ``image_size`` (the
    base tile resized and center-cropped to it), grids from ``image_grid_pinpoints``; each ``<image>`` expanded to
    the packed feature count (``num_additional_image_tokens`` counts the class token the "default" strategy
    drops)."""
    from transformers import LlavaNextProcessor
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil

    recipe = {k: v for k, v in fam.tiny["processor"].items() if k != "kind"}
    side = recipe.pop("image_size")
    pinpoints = [list(p) for p in recipe.pop("image_grid_pinpoints")]
    image_processor = LlavaNextImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side},
                                                 image_grid_pinpoints=pinpoints)
    return LlavaNextProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template,
                              **recipe)


def llava_onevision_processor(fam: Any, tokenizer: Any, chat_template: str | None):
    """``OnevisionImageTextProcessor`` (LlavaOnevisionProcessor less its video processor, which needs torchvision)
    over ``LlavaOnevisionImageProcessorPil``: tiles of ``image_size`` (the base tile resized
    to it, no crop), grids from ``image_grid_pinpoints``; each ``<image>`` expanded to the packed feature count,
    pooled under ``vision_aspect_ratio`` (anyres_max_N), or ``num_image_tokens`` + 1 in a prompt of several."""
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import (
        LlavaOnevisionImageProcessorPil,
    )

    recipe = {k: v for k, v in fam.tiny["processor"].items() if k != "kind"}
    side = recipe.pop("image_size")
    pinpoints = [list(p) for p in recipe.pop("image_grid_pinpoints")]
    image_processor = LlavaOnevisionImageProcessorPil(size={"height": side, "width": side},
                                                      image_grid_pinpoints=pinpoints)
    from nncanon.parts.vision.onevision_processing import OnevisionImageTextProcessor

    return OnevisionImageTextProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                       chat_template=chat_template, **recipe)


#: processor kind -> its recipe
ANYRES_PROCESSORS = {"llava_next": llava_next_processor, "llava_onevision": llava_onevision_processor}
