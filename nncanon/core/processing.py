"""An image-text processor for the Qwen vision-language checkpoints (Qwen2-VL, Qwen2.5-VL, Qwen3-VL,
Qwen3.5 / Qwen3.6 and their MoE lines) that works without torchvision.

transformers maps ``qwen3_5`` and ``qwen3_5_moe`` to ``Qwen3VLProcessor``, which always builds a
video processor; the only video processor registered for these model types
(``Qwen3VLVideoProcessor``) needs torchvision, and ``Qwen3VLProcessor(..., video_processor=None)``
fails without it. :class:`QwenImageTextProcessor` is ``Qwen3VLProcessor`` with images and text
only: it expands each ``<|image_pad|>`` to ``t * h * w / merge_size**2`` image tokens and emits
``mm_token_type_ids`` (which the Qwen3.5 models require), exactly as ``Qwen3VLProcessor`` does,
and pads a batch of prompts by default. On images it is what each line's own processor does
(``Qwen2VLProcessor``, ``Qwen2_5_VLProcessor`` and ``Qwen3VLProcessor`` expand the placeholder the same
way and emit the same ``mm_token_type_ids``), so the tiny checkpoints of every Qwen VL family use it.

A prompt holds one ``<|vision_start|><|image_pad|><|vision_end|>`` per image (the chat template
writes it for an ``{"type": "image"}`` part); ``images`` is a flat list in prompt order, or one
list per prompt::

    model.trace(f"Compare {pad} with {pad}.", images=[red, wide])
    model.trace([f"One {pad}.", f"Two {pad} {pad}."], images=[[red], [wide, red]])

Because it is not registered with ``AutoProcessor`` (that would change what ``AutoProcessor``
returns for every real Qwen3.5 checkpoint in the process), load a saved one with
:func:`load_processor`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from transformers import Qwen3VLProcessor
from transformers.processing_utils import ProcessorMixin

__all__ = ["QwenImageTextProcessor", "load_processor", "image_placeholder"]


class QwenImageTextProcessor(Qwen3VLProcessor):
    """``Qwen3VLProcessor`` without a video processor (images and text only).

    The sub-processors are read from ``__init__``'s signature, so this class has exactly two:
    ``image_processor`` (e.g. ``Qwen2VLImageProcessorPil``) and ``tokenizer``.
    """

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        # Qwen3VLProcessor passes (image_processor, tokenizer, video_processor) on to
        # ProcessorMixin, which pairs them with this class's two attributes: the None video
        # processor is dropped, and `hasattr(self, "video_processor")` stays False.
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError(
                f"{type(self).__name__} handles images and text only: videos need the torchvision-based "
                "Qwen3VLVideoProcessor (install torchvision and use transformers.Qwen3VLProcessor)"
            )
        if isinstance(text, (list, tuple)) and len(text) > 1:
            # A batch of prompts of different lengths is padded (on the tokenizer's side, the
            # left), as ``model.trace([p1, p2], images=[[a], [b, c]])`` needs one tensor.
            kwargs.setdefault("padding", True)
        return super().__call__(images=images, text=text, **kwargs)


def load_processor(path: str | os.PathLike) -> ProcessorMixin:
    """Load the processor saved in a checkpoint directory, offline.

    A directory saved from :class:`QwenImageTextProcessor` loads as that class; any other
    processor loads through ``AutoProcessor``.
    """
    path = Path(path)
    config_file = path / "processor_config.json"
    processor_class = None
    if config_file.is_file():
        processor_class = json.loads(config_file.read_text(encoding="utf-8")).get("processor_class")
    if processor_class == QwenImageTextProcessor.__name__:
        return QwenImageTextProcessor.from_pretrained(path, local_files_only=True)
    if processor_class == "OnevisionImageTextProcessor":  # nncanon.parts.vision.onevision_processing's, torchvision-free
        from ..parts.vision.onevision_processing import OnevisionImageTextProcessor

        return OnevisionImageTextProcessor.from_pretrained(path, local_files_only=True)
    if processor_class == "InternVLImageTextProcessor":  # nncanon.parts.vision.internvl_processing's, torchvision-free
        from ..parts.vision.internvl_processing import InternVLImageTextProcessor

        return InternVLImageTextProcessor.from_pretrained(path, local_files_only=True)
    if processor_class == "GotOcr2ImageTextProcessor":  # nncanon.parts.vision.got_ocr2_processing's: its token count saved
        from ..parts.vision.got_ocr2_processing import GotOcr2ImageTextProcessor

        return GotOcr2ImageTextProcessor.from_pretrained(path, local_files_only=True)
    if processor_class == "PixtralImageTextProcessor":  # nncanon.parts.vision.pixtral_processing's, torchvision-free
        from ..parts.vision.pixtral_processing import PixtralImageTextProcessor

        return PixtralImageTextProcessor.from_pretrained(path, local_files_only=True)
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(path, local_files_only=True)


def image_placeholder(processor) -> str:
    """What a prompt writes for one image: ``<|vision_start|><|image_pad|><|vision_end|>`` on Qwen."""
    start = getattr(processor, "vision_start_token", "<|vision_start|>")
    end = getattr(processor, "vision_end_token", "<|vision_end|>")
    return f"{start}{processor.image_token}{end}"
