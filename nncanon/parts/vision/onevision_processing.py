"""LLaVA-OneVision's processor without its video processor (images and text only), which works without torchvision.

``LlavaOnevisionProcessor`` always checks a video processor's class, and the only one registered for
llava_onevision (``LlavaOnevisionVideoProcessor``) needs torchvision: ``LlavaOnevisionProcessor(...,
video_processor=None)`` fails without it. :class:`OnevisionImageTextProcessor` is ``LlavaOnevisionProcessor`` with
two sub-processors (read from ``__init__``'s signature, as `nncanon.core.processing.QwenImageTextProcessor` does):
each ``<image>`` expanded exactly as the original does (the packed, pooled feature count of an image alone in its
prompt, ``num_image_tokens`` + 1 in a prompt of several), a batch of prompts padded by default. It is not
registered with ``AutoProcessor``; `nncanon.core.processing.load_processor` loads a saved one by its class name.
"""

from __future__ import annotations

from transformers import LlavaOnevisionProcessor


class OnevisionImageTextProcessor(LlavaOnevisionProcessor):
    """``LlavaOnevisionProcessor`` without a video processor (images and text only)."""

    def __init__(self, image_processor=None, tokenizer=None, num_image_tokens=None,
                 vision_feature_select_strategy=None, chat_template=None, image_token="<image>",
                 video_token="<video>", vision_aspect_ratio="anyres_max_9", **kwargs):
        # the parent hands (image_processor, tokenizer, None) to ProcessorMixin, which pairs them with this class's
        # two attributes: the None video processor is dropped
        super(OnevisionImageTextProcessor, self).__init__(
            image_processor, tokenizer, None, num_image_tokens=num_image_tokens,
            vision_feature_select_strategy=vision_feature_select_strategy, chat_template=chat_template,
            image_token=image_token, video_token=video_token, vision_aspect_ratio=vision_aspect_ratio, **kwargs)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError(f"{type(self).__name__} handles images and text only: videos need the torchvision-based "
                             "LlavaOnevisionVideoProcessor (install torchvision and use LlavaOnevisionProcessor)")
        if isinstance(text, (list, tuple)) and len(text) > 1:
            kwargs.setdefault("padding", True)  # a batch of prompts of different lengths needs one tensor
        return super(OnevisionImageTextProcessor, self).__call__(images=images, text=text, **kwargs)


__all__ = ["OnevisionImageTextProcessor"]
