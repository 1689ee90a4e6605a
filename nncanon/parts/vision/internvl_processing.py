"""InternVL's processor without its video processor (images and text only), which works without torchvision.

``InternVLProcessor`` always pairs a video processor, and the one registered for internvl needs torchvision.
:class:`InternVLImageTextProcessor` is ``InternVLProcessor`` with two sub-processors (the image processor,
``GotOcr2ImageProcessorPil``, and the tokenizer): each ``<image>`` expanded to ``<img>``, ``image_seq_length``
``<IMG_CONTEXT>`` tokens per tile and ``</img>``, exactly as the original does. It is not registered with
``AutoProcessor``; `nncanon.core.processing.load_processor` loads a saved one by its class name.
"""

from __future__ import annotations

from transformers import InternVLProcessor


class InternVLImageTextProcessor(InternVLProcessor):
    """``InternVLProcessor`` without a video processor (images and text only)."""

    def __init__(self, image_processor=None, tokenizer=None, image_seq_length: int = 256, chat_template=None,
                 **kwargs):
        # the parent hands (image_processor, tokenizer, None) to ProcessorMixin, which pairs them with this class's
        # two attributes: the None video processor is dropped
        super(InternVLImageTextProcessor, self).__init__(image_processor, tokenizer, None,
                                                         image_seq_length=image_seq_length,
                                                         chat_template=chat_template, **kwargs)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError(f"{type(self).__name__} handles images and text only: videos need the torchvision-based "
                             "InternVLVideoProcessor (install torchvision and use InternVLProcessor)")
        return super(InternVLImageTextProcessor, self).__call__(images=images, text=text, **kwargs)


__all__ = ["InternVLImageTextProcessor"]
