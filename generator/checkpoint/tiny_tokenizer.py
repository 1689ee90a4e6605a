"""The tiny checkpoint's tokenizer and processor: a byte-level BPE trained on a fixed corpus,
with the pipeline, special tokens and chat template of the real tokenizer it imitates.

Every output is a pure function of the recipe (``tiny.tokenizer``, ``tiny.processor``), the corpus
and the templates below: training a BPE is integer counting, so the files are the same on every CPU.
"""

from __future__ import annotations

import dataclasses
import json
import re

from generator.checkpoint.processors_anyres import ANYRES_PROCESSORS
from generator.checkpoint.processors_aya_vision import aya_vision_processor
from generator.checkpoint.processors_deepseek_vl import deepseek_vl_processor
from generator.checkpoint.processors_idefics import idefics2_processor, idefics3_processor
from generator.checkpoint.processors_internvl import internvl_processor
from generator.checkpoint.processors_mllama import mllama_processor
from generator.checkpoint.processors_paligemma import paligemma_processor
from generator.checkpoint.processors_pixtral import (
    got_ocr2_processor,
    lighton_ocr_processor,
    pixtral_processor,
)
from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError
from generator.recipe.tokenizer_presets import (
    CORPUS,
    PIPELINE_FIELDS,
    SPLITS,
    TEMPLATES,
    TOKENIZER_KINDS,
    TokenizerKind,
)


def tokenizer_kind(fam: Family) -> TokenizerKind:
    """The recipe's pipeline: the preset ``kind`` (default qwen3_5), with what ``pipeline`` declares
    in its place (``class``, ``split``, ``chat_template``, ``bos``, ``eos``, ``pad``, ``padding_side``,
    ``nfc``): a family whose tokenizer is like no preset declares its own."""
    recipe = fam.tiny["tokenizer"]
    kind = TOKENIZER_KINDS[recipe.get("kind", "qwen3_5")]
    changes = {}
    for field, value in (recipe.get("pipeline") or {}).items():
        where = f"tiny.tokenizer.pipeline.{field}"
        if field not in PIPELINE_FIELDS:
            raise FamilyYamlError(fam.path, where, f"unknown field (allowed: {', '.join(PIPELINE_FIELDS)})")
        table = {"split": SPLITS, "chat_template": TEMPLATES}.get(field)
        if table is not None:
            if value not in table:
                raise FamilyYamlError(fam.path, where, f"{value!r} is none of {', '.join(table)}")
            value = table[value]
        changes[PIPELINE_FIELDS[field]] = value
    return dataclasses.replace(kind, **changes)


def transformers_class(fam: Family, name: str, field: str) -> type:
    import transformers

    cls = getattr(transformers, name, None)
    if not isinstance(cls, type):
        raise FamilyYamlError(
            fam.path, field, f"transformers {transformers.__version__} has no class {name!r}"
        )
    return cls



def _with_inline_specials(vocab: dict[str, int], specials: list[tuple[str, int]]) -> dict[str, int]:
    """The BPE's vocabulary with the special tokens whose ids fall inside it (Gemma's and Mistral's
    <pad>/<bos>/<eos> at 0-2) placed there, the BPE's own tokens keeping their order in the other ids.
    Special tokens after the vocabulary are added later, in id order, as the real tokenizers do."""
    inline = [(token, token_id) for token, token_id in specials if token_id < len(vocab) + len(specials)
              and token_id < len(vocab) + sum(1 for _, i in specials if i < token_id)]
    if not inline:
        return vocab
    taken = {token_id for _, token_id in inline}
    free = (i for i in range(len(vocab) + len(inline)) if i not in taken)
    placed = {token: next(free) for token, _ in sorted(vocab.items(), key=lambda item: item[1])}
    placed.update(inline)
    return placed


def _special_token_list(fam: Family) -> list[tuple[str, int]]:
    specials = fam.tiny["tokenizer"]["special_tokens"]
    return sorted(specials.items(), key=lambda item: item[1])


def build_tokenizer(fam: Family):
    """A byte-level BPE trained on :data:`CORPUS`, with the family's special tokens at their ids.

    The pipeline is the real tokenizer's of ``tiny.tokenizer.kind`` (:data:`TOKENIZER_KINDS`), with
    what ``tiny.tokenizer.pipeline`` declares in its place (:func:`tokenizer_kind`):
    its normalizer, split regex, byte-level without prefix space, BOS, eos and pad tokens and chat
    template, saved as the class ``AutoTokenizer`` picks for the family's checkpoints. The default
    kind, ``qwen3_5``, is Qwen3.5's: ``Qwen3_5Tokenizer``, no BOS, eos = pad = ``<|endoftext|>``,
    left padding.
    """
    import transformers
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE
    from transformers import AddedToken

    kind = tokenizer_kind(fam)
    recipe = fam.tiny["tokenizer"]
    size = recipe["bpe_vocab_size"]
    config = fam.tiny["config"]
    if kind.cls == "BertTokenizer":  # an encoder's WordPiece, not a byte-level BPE
        from generator.checkpoint.wordpiece import build_wordpiece

        return build_wordpiece(fam, CORPUS, int(config.get("max_position_embeddings", 512)))
    if kind.cls in ("RobertaTokenizer", "XLMRobertaTokenizer", "CamembertTokenizer", "T5Tokenizer", "PegasusTokenizer") \
            or recipe.get("kind") == "marian":  # RoBERTa's BPE, the unigrams (the encoders' and the encoder-decoders')
        from generator.checkpoint import encoder_tokenizers as built

        build = built.build_marian_unigram if recipe.get("kind") == "marian" else {
            "RobertaTokenizer": built.build_roberta_bpe, "XLMRobertaTokenizer": built.build_xlm_roberta_unigram,
            "CamembertTokenizer": built.build_camembert_unigram, "T5Tokenizer": built.build_t5_unigram,
            "PegasusTokenizer": built.build_pegasus_unigram}[kind.cls]
        return build(fam, CORPUS)
    if kind.cls == "WhisperTokenizer":  # a speech family's (generator/checkpoint/speech.py)
        from generator.checkpoint.speech import build_whisper_bpe

        return build_whisper_bpe(fam, CORPUS)

    backend = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    if kind.nfc:
        backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(kind.regex()), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        min_frequency=1,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # Train on the text between the special tokens only: they must not become merges.
    pieces = re.split("|".join(re.escape(t) for t, _ in _special_token_list(fam)), CORPUS)
    backend.train_from_iterator([p for p in pieces if p], trainer=trainer)
    model = json.loads(backend.to_str())["model"]
    vocab, merges = (
        model["vocab"],
        [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]],
    )
    if len(vocab) != size:
        raise RuntimeError(
            f"{fam.family}: the BPE trained on the corpus has {len(vocab)} ids, not "
            f"tiny.tokenizer.bpe_vocab_size = {size}: the corpus is too small for that many merges"
        )

    vocab = _with_inline_specials(vocab, _special_token_list(fam))

    common = {
        "unk_token": None,
        "model_max_length": int(config.get("text_config", config).get("max_position_embeddings", 32768)),
        "chat_template": kind.template,
    }
    if kind.padding_side is not None:
        common["padding_side"] = kind.padding_side
    if kind.closer is not None:  # an encoder's tokenizer passes no token types (ModernBERT's model takes none)
        common["model_input_names"] = ["input_ids", "attention_mask"]
    first = _special_token_list(fam)[0][0]
    cls = transformers_class(fam, kind.cls, "tiny.tokenizer.kind")
    if cls is transformers.PreTrainedTokenizerFast:
        backend.model = BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False)
        tokenizer = cls(tokenizer_object=backend, **common)
    else:
        # The Qwen classes add their eos and pad tokens at construction: name the first special
        # token there, so every special token takes its declared id, and set the kind's below.
        tokenizer = cls(vocab=vocab, merges=merges, bos_token=None, eos_token=first, pad_token=first, **common)
    # As in Qwen's and Llama's tokenizers, the <|...|> control tokens are special (skipped by
    # decode(skip_special_tokens=True)), and so are Mistral's [INST], [IMG], ... (tekken's control tokens);
    # <think>, <tool_call> and their closers are added tokens that decode as text.
    roles = {kind.bos, kind.eos, kind.pad} - {None}
    for token, token_id in _special_token_list(fam):
        special = ((token.startswith("<|") and token.endswith("|>")) or token in roles
                   or re.fullmatch(r"\[/?[A-Z_]+\]", token) is not None)
        if token not in tokenizer.get_vocab() or special:
            # a special token already in the vocabulary (placed at its id below the BPE's) keeps its id
            added = AddedToken(token, special=special, normalized=False, lstrip=False, rstrip=False)
            tokenizer.add_tokens([added], special_tokens=special)
        got = tokenizer.convert_tokens_to_ids(token)
        if got != token_id:
            raise RuntimeError(
                f"{fam.family}: special token {token!r} got id {got}, but "
                f"tiny.tokenizer.special_tokens declares {token_id}; declare them at their real ids: below "
                f"the BPE's, or at consecutive ids after them (from {size} plus those below)"
            )
    for role, token in (("eos_token", kind.eos), ("pad_token", kind.pad), ("bos_token", kind.bos)):
        if getattr(tokenizer, role) != token:
            setattr(tokenizer, role, token)
    if kind.closer is not None:  # BERT's roles, named as an encoder's tokenizer names them
        names = dict(_special_token_list(fam))
        for role, token in (("cls_token", kind.bos), ("sep_token", kind.closer), ("mask_token", "[MASK]"),
                            ("unk_token", "[UNK]")):
            if token in names:
                setattr(tokenizer, role, token)
    if kind.bos is not None:
        # the BOS token starts every encoding, as Llama 3's post-processor does
        bos_id = tokenizer.convert_tokens_to_ids(kind.bos)
        if kind.closer is None:
            tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{kind.bos} $A", pair=f"{kind.bos} $A {kind.bos} $B:1", special_tokens=[(kind.bos, bos_id)]
            )
        else:  # an encoder's frame: [CLS] A [SEP], a pair [CLS] A [SEP] B [SEP]
            close = kind.closer
            tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{kind.bos} $A {close}", pair=f"{kind.bos} $A {close} $B:1 {close}:1",
                special_tokens=[(kind.bos, bos_id), (close, tokenizer.convert_tokens_to_ids(close))]
            )
    return tokenizer


def build_processor(fam: Family, tokenizer=None):
    """The image-text processor: ``Qwen2VLImageProcessorPil`` with ``tiny.processor`` settings
    and the tokenizer, combined without a video processor (no torchvision needed); with
    ``tiny.processor.kind: llava``, a ``LlavaProcessor`` (:func:`_llava_processor`)."""
    from transformers import Qwen2VLImageProcessorPil

    from nncanon.core.processing import QwenImageTextProcessor

    tokenizer = tokenizer if tokenizer is not None else build_tokenizer(fam)
    if fam.tiny["processor"].get("kind") == "llava":
        return _llava_processor(fam, tokenizer)
    if fam.tiny["processor"].get("kind") == "gemma3":
        return _gemma3_processor(fam, tokenizer)
    if (anyres := ANYRES_PROCESSORS.get(fam.tiny["processor"].get("kind"))) is not None:  # processors_anyres.py
        return anyres(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "idefics3":
        return idefics3_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "idefics2":
        return idefics2_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "mllama":
        return mllama_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "paligemma":
        return paligemma_processor(fam, tokenizer)
    if fam.tiny["processor"].get("kind") == "internvl":
        return internvl_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "got_ocr2":
        return got_ocr2_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "lighton_ocr":
        return lighton_ocr_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "pixtral":
        return pixtral_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "aya_vision":
        return aya_vision_processor(fam, tokenizer, tokenizer_kind(fam).template)
    if fam.tiny["processor"].get("kind") == "deepseek_vl":
        return deepseek_vl_processor(fam, tokenizer, tokenizer_kind(fam).template)
    image_processor = Qwen2VLImageProcessorPil(**fam.tiny["processor"])
    return QwenImageTextProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer_kind(fam).template
    )


def _llava_processor(fam: Family, tokenizer):
    """``LlavaProcessor`` over ``CLIPImageProcessorPil`` (no torchvision): every image resized (shortest edge)
    and center-cropped to ``image_size``, each ``<image>`` expanded to one token per patch (the class token
    counted by ``num_additional_image_tokens``, dropped again under the "default" strategy)."""
    from transformers import CLIPImageProcessorPil, LlavaProcessor

    recipe = {k: v for k, v in fam.tiny["processor"].items() if k != "kind"}
    side = recipe.pop("image_size")
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})
    return LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer,
                          chat_template=tokenizer_kind(fam).template, **recipe)


#: Gemma 3's tokenizer names its image tokens (Gemma3Processor reads them off the tokenizer)
_GEMMA3_IMAGE_TOKENS = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                        "image_token": "<image_soft_token>"}


def _gemma3_processor(fam: Family, tokenizer):
    """``Gemma3Processor`` over ``Gemma3ImageProcessorPil`` (no torchvision; pan and scan off): every image resized
    to ``image_size`` square, each ``<start_of_image>`` expanded to ``image_seq_length`` image tokens between
    ``<start_of_image>`` and ``<end_of_image>``; the tokenizer names its image tokens as Gemma 3's does."""
    from transformers import Gemma3ImageProcessorPil, Gemma3Processor

    recipe = {k: v for k, v in fam.tiny["processor"].items() if k != "kind"}
    side = recipe.pop("image_size")
    tokenizer._set_model_specific_special_tokens(dict(_GEMMA3_IMAGE_TOKENS))  # saved in tokenizer_config.json
    image_processor = Gemma3ImageProcessorPil(size={"height": side, "width": side}, do_pan_and_scan=False)
    return Gemma3Processor(image_processor=image_processor, tokenizer=tokenizer,
                           chat_template=tokenizer_kind(fam).template, **recipe)
