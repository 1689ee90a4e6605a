"""PaliGemma's tiny processor: ``PaliGemmaProcessor`` over ``SiglipImageProcessorPil`` and the family's tokenizer.

What makes PaliGemma's inputs PaliGemma's is the processor: every image resized to the tower's ``image_size``
square, each ``<image>`` expanded to ``image_seq_length`` image tokens, ``<bos>`` written after the last image
token (the tokenizer itself adds none: the processor turns ``add_bos_token`` off), ``\\n`` after the prompt, and
``suffix=`` encoded as the second sequence, which ``token_type_ids`` marks 1 (the prompt and the images 0: the
prefix the text model attends to both ways). The processor also adds Gemma's 1,152 ``<locNNNN>`` / ``<segNNN>``
tokens when the tokenizer lacks them (the real vocabulary holds them at 256000-257151); a loaded tiny processor adds
them in memory after the vocabulary, where no prompt of the build writes them, and the saved tokenizer has none.
"""

from __future__ import annotations

import copy

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
    # The processor adds the <loc>/<seg> tokens to the tokenizer it is given and turns its BOS off (it writes <bos>
    # itself): it is given a copy, and saves the recipe's tokenizer (BOS on, as PaliGemma's checkpoint tokenizer is;
    # no tokens past the vocabulary), which a loaded processor changes again in memory, as it does PaliGemma's.
    processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=copy.deepcopy(tokenizer), **recipe)
    processor.tokenizer = tokenizer
    return processor
