"""PaliGemma's tiny processor: ``PaliGemmaProcessor`` over ``SiglipImageProcessorPil`` and the family's tokenizer.

What makes PaliGemma's inputs PaliGemma's is the processor: every image resized to the tower's ``image_size``
square, each ``<image>`` expanded to ``image_seq_length`` image tokens, ``<bos>`` written after the last image
token (the tokenizer itself adds none: the processor turns ``add_bos_token`` off), ``\\n`` after the prompt, and
``suffix=`` encoded as the second sequence, which ``token_type_ids`` marks 1 (the prompt and the images 0: the
prefix the text model attends to both ways). The processor also adds Gemma's 1,152 ``<locNNNN>`` / ``<segNNN>``
tokens when the tokenizer lacks them (the real vocabulary holds them at 256000-257151); the tiny tokenizer takes
them after its vocabulary, where no prompt of the build writes them.
"""

from __future__ import annotations

from generator.recipe.family import Family

#: PaliGemma's tokenizer names its image token (PaliGemmaProcessor reads it off the tokenizer)
_IMAGE_TOKENS = {"image_token": "<image>"}


def paligemma_processor(fam: Family, tokenizer):
    """``PaliGemmaProcessor`` over ``SiglipImageProcessorPil`` (no torchvision): ``image_size`` square images,
    ``image_seq_length`` image tokens each; the tokenizer's BOS left to the processor, as PaliGemma's is."""
    from transformers import PaliGemmaProcessor, SiglipImageProcessorPil

    recipe = {k: v for k, v in fam.tiny["processor"].items() if k != "kind"}
    side = recipe.pop("image_size")
    tokenizer._set_model_specific_special_tokens(dict(_IMAGE_TOKENS))  # saved in tokenizer_config.json
    image_processor = SiglipImageProcessorPil(size={"height": side, "width": side})
    image_processor.image_seq_length = recipe.pop("image_seq_length")  # PaliGemmaProcessor requires the attribute
    processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer, **recipe)
    # The processor turned the tokenizer's BOS off (it writes <bos> itself); the checkpoint's tokenizer keeps it on,
    # as PaliGemma's does: a text prompt starts with <bos>, and a loaded processor turns it off again.
    tokenizer.add_bos_token = True
    return processor
