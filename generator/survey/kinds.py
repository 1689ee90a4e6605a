"""The survey's six kinds of model type: transformers' own lists, and which parts and call survey a type.

A type on a decoder list (causal LM, image-text-to-text) is surveyed on the decoder parts (``measure``); one on the
encoder lists alone on its kind's encoder parts (``encoders``).
"""

from __future__ import annotations

#: (kind, transformers' list of its model types): the Coverage page's task facet, in this order. A type on a decoder
#: list (the first two) is surveyed as a decoder; else as the first of the others it is on, speech-to-text before
#: seq2seq (a speech model's call takes its features)
KINDS = (("causal LM", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"), ("image-text-to-text", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"),
         ("masked LM", "MODEL_FOR_MASKED_LM_MAPPING_NAMES"), ("seq2seq", "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"),
         ("speech-to-text", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"), ("CTC", "MODEL_FOR_CTC_MAPPING_NAMES"))
DECODER_KINDS = ("causal LM", "image-text-to-text")
SURVEYED_AS = ("speech-to-text", "seq2seq", "CTC", "masked LM")


def mapping(kind: str) -> dict[str, str]:
    """model type -> class name of ``kind``'s list in the installed transformers."""
    from transformers.models.auto import modeling_auto

    return getattr(modeling_auto, dict(KINDS)[kind])


def kinds_of(model_type: str) -> list[str]:
    """The kinds whose lists name ``model_type``, in ``KINDS``' order."""
    return [kind for kind, _ in KINDS if model_type in mapping(kind)]


def surveyed_as(model_type: str) -> str:
    """The kind whose parts and call survey ``model_type``: a decoder's, else the first of ``SURVEYED_AS`` it is on."""
    kinds = kinds_of(model_type)
    return "decoder" if set(kinds) & set(DECODER_KINDS) else next(k for k in SURVEYED_AS if k in kinds)
