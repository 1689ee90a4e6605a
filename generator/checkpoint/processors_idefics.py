"""The tiny Idefics3 / SmolVLM processor: image splitting into rows x cols tiles and a global image.

``Idefics3Processor`` over ``Idefics3ImageProcessorPil`` (no torchvision): every image is resized so its longest
edge is ``size`` (``longest_edge``), then up to multiples of ``max_image_size``, cut into ``max_image_size``
square tiles (rows x cols) and followed by the whole image resized to one tile (the global image); each
``<image>`` in the prompt becomes, per tile, ``<fake_token_around_image><row_r_col_c>`` and ``image_seq_len``
image tokens, then ``<fake_token_around_image><global-img>``, the global image's tokens and a closing
``<fake_token_around_image>``. SmolVLM's processor (``SmolVLMProcessor``) writes the same image prompt string,
but needs num2words and a video processor (torchvision), neither installed: the smolvlm recipe uses this one.
"""

from __future__ import annotations

from generator.recipe.family import Family


def idefics3_processor(fam: Family, tokenizer, template: str):
    """The processor for ``tiny.processor`` (``kind: idefics3``): ``longest_edge`` (the resize), ``tile`` (the
    max_image_size a tile has, the tower's image_size) and ``image_seq_len`` (image tokens per tile)."""
    from transformers import Idefics3ImageProcessorPil, Idefics3Processor

    recipe = fam.tiny["processor"]
    image_processor = Idefics3ImageProcessorPil(size={"longest_edge": recipe["longest_edge"]},
                                                max_image_size={"longest_edge": recipe["tile"]},
                                                do_image_splitting=True)
    return Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer,
                             image_seq_len=recipe["image_seq_len"], chat_template=template)
