"""GOT-OCR 2.0's processor with its image token count saved: ``GotOcr2Processor`` writes ``num_image_tokens``
``<imgpad>`` per image, a class attribute (256, what GOT-OCR 2.0's projector makes of a 1024-pixel page) that no
saved file holds. :class:`GotOcr2ImageTextProcessor` takes it in ``__init__``, so a checkpoint whose projector makes
another count (the tiny one's) keeps its own, and a prompt without images is tokenized as text (GotOcr2Processor
refuses one, where every other image-text processor tokenizes it). It is not registered with ``AutoProcessor``;
`nncanon.core.processing.load_processor` loads a saved one by its class name.
"""

from __future__ import annotations

from transformers import GotOcr2Processor


class GotOcr2ImageTextProcessor(GotOcr2Processor):
    """``GotOcr2Processor`` with ``num_image_tokens`` (the image tokens per image) an argument it saves."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, num_image_tokens: int = 256,
                 **kwargs):
        super(GotOcr2ImageTextProcessor, self).__init__(image_processor, tokenizer, chat_template=chat_template,
                                                        **kwargs)
        self.num_image_tokens = num_image_tokens  # read as the call's default by ProcessorMixin._merge_kwargs

    def __call__(self, images=None, text=None, box=None, **kwargs):
        if images is None and text is not None:
            from transformers.feature_extraction_utils import BatchFeature

            tensors = kwargs.pop("return_tensors", None)
            text = [text] if isinstance(text, str) else text  # a batch of one: the rows the model reads
            return BatchFeature(dict(self.tokenizer(text, **kwargs)), tensor_type=tensors)
        return super(GotOcr2ImageTextProcessor, self).__call__(images=images, text=text, box=box, **kwargs)


__all__ = ["GotOcr2ImageTextProcessor"]
