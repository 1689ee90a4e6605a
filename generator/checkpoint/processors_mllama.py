"""The tiny checkpoint's processor for mllama (Llama 3.2 Vision): ``MllamaProcessor`` over
``MllamaImageProcessorPil`` (no torchvision), with a small tile and at most a few tiles an image."""

from __future__ import annotations

from typing import Any


def mllama_processor(fam: Any, tokenizer: Any, template: str | None) -> Any:
    """``MllamaProcessor``: each image resized to fit the best canvas of ``tile_size`` tiles (at most
    ``max_image_tiles``), padded and cut into tiles (so two images of different aspect ratios get different
    tile counts); each ``<|image|>`` stays one token, and the processor writes the ``cross_attention_mask``
    (which tiles each text token sees) and the aspect-ratio ids and mask the tower's tile embeddings read."""
    from transformers import MllamaImageProcessorPil, MllamaProcessor

    recipe = {k: v for k, v in fam.tiny["processor"].items() if k != "kind"}
    side = recipe.pop("tile_size")
    image_processor = MllamaImageProcessorPil(size={"height": side, "width": side}, **recipe)
    return MllamaProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=template)
