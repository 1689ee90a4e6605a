"""LightOnOCR's tiny processor: ``LightOnOcrProcessor`` over ``PixtralImageProcessorPil`` (no torchvision).

Every image is resized, aspect kept, so its longest edge is at most ``longest_edge`` pixels and each side a multiple of
the patch, and the batch padded to its largest image (the model crops each image back by ``image_sizes``); each
``<|image_pad|>`` of the prompt becomes one ``<|image_pad|>`` per merged square of the image's patch grid, with no
row breaks (LightOnOcrProcessor writes none, though it names ``<|vision_pad|>`` and ``<|vision_end|>`` as its break
and end tokens, as the tokenizer does).
"""

from __future__ import annotations

from typing import Any

#: the tokenizer attributes LightOnOcrProcessor reads its image tokens from (LightOnOCR-1B-1025's processor_config)
_IMAGE_TOKENS = {"image_token": "<|image_pad|>", "image_break_token": "<|vision_pad|>",
                 "image_end_token": "<|vision_end|>"}


def lighton_ocr_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """The processor for ``tiny.processor`` (``kind: lighton_ocr``): ``longest_edge``, ``patch_size`` (the tower's,
    the image processor's too, as on LightOnOCR-1B-1025) and ``spatial_merge_size`` (the projector's)."""
    from transformers import LightOnOcrProcessor
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil

    recipe = fam.tiny["processor"]
    tokenizer._set_model_specific_special_tokens(dict(_IMAGE_TOKENS))  # saved in tokenizer_config.json
    patch = recipe["patch_size"]
    image_processor = PixtralImageProcessorPil(size={"longest_edge": recipe["longest_edge"]},
                                               patch_size={"height": patch, "width": patch})
    return LightOnOcrProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=patch,
                               spatial_merge_size=recipe["spatial_merge_size"], chat_template=template)
