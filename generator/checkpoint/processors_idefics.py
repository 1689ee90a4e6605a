"""The tiny Idefics2 and Idefics3 / SmolVLM processors: Idefics2's images padded to one size, Idefics3's split
into rows x cols tiles and a global image.

``Idefics2Processor`` over ``Idefics2ImageProcessorPil`` (no torchvision): every image is resized between a
shortest and a longest edge (its aspect kept), padded at the bottom and right to the call's largest height and width
(``pixel_attention_mask`` 1 on its own pixels), and each ``<image>`` of the prompt becomes
``<fake_token_around_image>``, ``image_seq_len`` image tokens (the resampler's latents) and
``<fake_token_around_image>``.

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


def idefics2_processor(fam: Family, tokenizer, template: str):
    """The processor for ``tiny.processor`` (``kind: idefics2``): ``shortest_edge`` and ``longest_edge`` (the
    resize) and ``image_seq_len`` (image tokens per image: the perceiver's resampler_n_latents); no splitting."""
    from transformers import Idefics2ImageProcessorPil, Idefics2Processor

    recipe = fam.tiny["processor"]
    image_processor = Idefics2ImageProcessorPil(size={"shortest_edge": recipe["shortest_edge"],
                                                      "longest_edge": recipe["longest_edge"]},
                                                do_image_splitting=False)
    return Idefics2Processor(image_processor=image_processor, tokenizer=tokenizer,
                             image_seq_len=recipe["image_seq_len"], chat_template=template)
