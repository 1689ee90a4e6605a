"""DeepSeek-VL's tiny processor: ``DeepseekVLProcessor`` over ``DeepseekVLImageProcessorPil`` (no torchvision).

Every image is shrunk until its longest side is ``image_size`` pixels and padded to a square with the mean colour;
each ``<image_placeholder>`` of the prompt becomes ``num_image_tokens`` of them (every patch of the tower's grid).
DeepSeek-VL's tokenizer names its image token (the processor reads it off it), as the recipe's does.
"""

from __future__ import annotations

from typing import Any


def deepseek_vl_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """The processor for ``tiny.processor`` (``kind: deepseek_vl``): ``image_size`` (the tower's) and
    ``num_image_tokens`` (its patches)."""
    from transformers import DeepseekVLImageProcessorPil, DeepseekVLProcessor

    recipe = fam.tiny["processor"]
    tokenizer._set_model_specific_special_tokens({"image_token": "<image_placeholder>"})  # in tokenizer_config.json
    side = recipe["image_size"]
    image_processor = DeepseekVLImageProcessorPil(size={"height": side, "width": side})
    return DeepseekVLProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=template,
                               num_image_tokens=recipe["num_image_tokens"])
