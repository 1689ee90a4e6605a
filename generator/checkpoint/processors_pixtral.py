"""Mistral 3's and LightOnOCR's tiny processors: Pixtral's over ``PixtralImageProcessorPil`` (no torchvision:
`nncanon.parts.vision.pixtral_processing.PixtralImageTextProcessor`), and ``LightOnOcrProcessor`` over the same;
and GOT-OCR 2.0's (its page resized to one square, a fixed count of image tokens).

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


#: LightOnOCR's processor reads its image tokens off the tokenizer (Qwen's vision tokens, its processor_config.json's)
_LIGHTON_OCR_IMAGE_TOKENS = {"image_token": "<|image_pad|>", "image_break_token": "<|vision_pad|>",
                             "image_end_token": "<|vision_end|>"}


def lighton_ocr_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """``LightOnOcrProcessor`` over ``PixtralImageProcessorPil`` (``kind: lighton_ocr``): every image resized so its
    longest edge is at most ``longest_edge`` and each side a multiple of ``patch_size`` x ``spatial_merge_size`` (a
    whole number of merged squares), each ``<|image_pad|>`` of a prompt expanded to one per merged square, no row
    breaks; the tokenizer names its image tokens as LightOnOCR's does."""
    from transformers import LightOnOcrProcessor
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    recipe = fam.tiny["processor"]
    patch, merge = recipe["patch_size"], recipe["spatial_merge_size"]
    tokenizer._set_model_specific_special_tokens(dict(_LIGHTON_OCR_IMAGE_TOKENS))  # saved in tokenizer_config.json
    image_processor = PixtralImageProcessorPil(size={"longest_edge": recipe["longest_edge"]},
                                               patch_size={"height": patch * merge, "width": patch * merge})
    return LightOnOcrProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=patch,
                               spatial_merge_size=merge, chat_template=template)


def got_ocr2_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """``GotOcr2ImageTextProcessor`` over ``GotOcr2ImageProcessorPil`` (``kind: got_ocr2``): every image resized to
    ``image_size`` square, each ``<imgpad>`` of a prompt expanded to ``num_image_tokens`` (the projector's cells)."""
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil

    from nncanon.parts.vision.got_ocr2_processing import GotOcr2ImageTextProcessor

    recipe = fam.tiny["processor"]
    side = recipe["image_size"]
    image_processor = GotOcr2ImageProcessorPil(size={"height": side, "width": side})
    return GotOcr2ImageTextProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=template,
                                     num_image_tokens=recipe["num_image_tokens"])
