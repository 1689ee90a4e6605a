"""InternVL's tiny processor: ``InternVLImageTextProcessor`` (InternVLProcessor without its video processor) over
``GotOcr2ImageProcessorPil`` (no torchvision).

Every image is cut into tiles of ``tile`` pixels, the grid whose aspect is closest to the image's with at most
``max_patches`` tiles, and the whole image shrunk to one tile is added (the thumbnail); each ``<image>`` of the
prompt becomes ``<img>``, ``image_seq_length`` ``<IMG_CONTEXT>`` tokens per tile and ``</img>``. InternVL's
tokenizer names its image tokens (the processor reads them off it), as the recipe's does.
"""

from __future__ import annotations

from typing import Any

#: the tokenizer attributes InternVLProcessor reads its image tokens from
_IMAGE_TOKENS = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
                 "video_token": "<video>"}


def internvl_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """The processor for ``tiny.processor`` (``kind: internvl``): ``tile`` (the tower's image_size),
    ``max_patches`` and ``image_seq_length`` (image tokens per tile)."""
    from transformers import GotOcr2ImageProcessorPil

    from nncanon.parts.vision.internvl_processing import InternVLImageTextProcessor

    recipe = fam.tiny["processor"]
    tokenizer._set_model_specific_special_tokens(dict(_IMAGE_TOKENS))  # saved in tokenizer_config.json
    side = recipe["tile"]
    image_processor = GotOcr2ImageProcessorPil(size={"height": side, "width": side}, crop_to_patches=True,
                                               min_patches=1, max_patches=recipe["max_patches"])
    return InternVLImageTextProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                      image_seq_length=recipe["image_seq_length"], chat_template=template)
