"""A speech family's tiny preprocessing: Whisper's tokenizer and log-mel feature extractor, built from the recipe.

``tiny.tokenizer.kind: whisper``: ``WhisperTokenizer`` (GPT-2's byte-level BPE and split, no prefix space) over a
BPE of ``bpe_vocab_size`` pieces trained on the shared corpus, ``<|endoftext|>`` right after the pieces (bos, eos,
pad and unk, as whisper-tiny's 50257 is), then the recipe's task tokens (``<|startoftranscript|>`` ...) at their
declared ids. ``tiny.feature_extractor``: ``WhisperFeatureExtractor``'s settings (``feature_size`` is the
config's ``num_mel_bins``); its ``nb_max_frames`` must be what the encoder's two convolutions take,
``2 · max_source_positions`` (conv2 has stride 2).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

ENDOFTEXT = "<|endoftext|>"


def build_whisper_bpe(fam: Any, corpus: str) -> Any:
    from transformers import WhisperTokenizer

    from generator.checkpoint.encoder_tokenizers import byte_level_bpe

    recipe = fam.tiny["tokenizer"]
    size = recipe["bpe_vocab_size"]
    specials = dict(recipe["special_tokens"])
    if specials.get(ENDOFTEXT) != size:
        raise RuntimeError(f"{fam.family}: {ENDOFTEXT} must be id {size}, right after the {size} BPE pieces")
    vocab, pairs = byte_level_bpe(fam, corpus, size)
    merges = [" ".join(pair) for pair in pairs]
    with tempfile.TemporaryDirectory() as tmp:
        vocab_file, merges_file = Path(tmp, "vocab.json"), Path(tmp, "merges.txt")
        vocab_file.write_text(json.dumps({**vocab, ENDOFTEXT: size}), encoding="utf-8")
        merges_file.write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
        tokenizer = WhisperTokenizer(str(vocab_file), str(merges_file), unk_token=ENDOFTEXT, bos_token=ENDOFTEXT,
                                     eos_token=ENDOFTEXT, pad_token=ENDOFTEXT)
        task_tokens = sorted((i, t) for t, i in specials.items() if t != ENDOFTEXT)
        tokenizer.add_special_tokens({"additional_special_tokens": [t for _, t in task_tokens]})
    for token, token_id in specials.items():
        if tokenizer.convert_tokens_to_ids(token) != token_id:
            raise RuntimeError(f"{fam.family}: special token {token!r} got id "
                               f"{tokenizer.convert_tokens_to_ids(token)}, not its declared {token_id}")
    return tokenizer


def whisper_feature_extractor(fam: Any) -> Any:
    from transformers import WhisperFeatureExtractor

    extractor = WhisperFeatureExtractor(**fam.tiny["feature_extractor"])
    config = fam.tiny["config"]
    if extractor.feature_size != config["num_mel_bins"] or extractor.nb_max_frames != 2 * config[
            "max_source_positions"]:
        raise RuntimeError(f"{fam.family}: tiny.feature_extractor gives {extractor.feature_size} mel bins and "
                           f"{extractor.nb_max_frames} frames; the encoder takes num_mel_bins and "
                           "2 · max_source_positions")
    return extractor
