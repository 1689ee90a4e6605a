"""The tiny checkpoint's WordPiece tokenizer, for the encoder families whose real tokenizer is BERT's
(``tiny.tokenizer.kind: wordpiece``): lowercased, accents stripped, split on whitespace and punctuation, each
word cut into the longest pieces the vocabulary holds (``##`` continuing a word), ``[CLS] A [SEP] B [SEP]``
around a pair with token_type_ids 0 then 1, padding on the right.

bert-base-uncased's vocab.txt puts ``[PAD]`` at 0, ``[unused0]`` .. ``[unused98]`` at 1-99, ``[UNK]`` 100,
``[CLS]`` 101, ``[SEP]`` 102, ``[MASK]`` 103 and the pieces after them; the tiny vocabulary keeps that layout
(the special tokens at their real ids, the unused rows between them), then the pieces a WordPiece trainer finds
on the shared corpus (`CORPUS`). Training is integer counting, so the files are the same on every CPU.
"""

from __future__ import annotations

from typing import Any

#: bert-base-uncased's special tokens at their ids (its vocab.txt), the unused rows between them filled in
ROLES = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
         "mask_token": "[MASK]"}


def reserved(specials: dict[str, int]) -> dict[str, int]:
    """The ids below the first piece: each special token at its declared id, ``[unusedN]`` in every gap."""
    top = max(specials.values())
    taken = {i: token for token, i in specials.items()}
    unused = iter(range(top + 1))
    return {taken.get(i) or f"[unused{next(unused)}]": i for i in range(top + 1)}


def build_wordpiece(fam: Any, corpus: str, max_length: int) -> Any:
    """``BertTokenizer`` over a WordPiece vocabulary of the reserved rows then ``bpe_vocab_size`` trained pieces."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, trainers
    from tokenizers.models import WordPiece
    from transformers import BertTokenizer

    recipe = fam.tiny["tokenizer"]
    specials = dict(recipe["special_tokens"])
    missing = sorted(set(ROLES.values()) - set(specials))
    if missing:
        raise RuntimeError(f"{fam.family}: a WordPiece tokenizer needs {', '.join(missing)} in "
                           "tiny.tokenizer.special_tokens")
    rows = reserved(specials)
    size = recipe["bpe_vocab_size"]
    backend = Tokenizer(WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=size, min_frequency=1, special_tokens=[], show_progress=False)
    backend.train_from_iterator([corpus], trainer=trainer)
    pieces = sorted(backend.get_vocab().items(), key=lambda item: item[1])
    if len(pieces) != size:
        raise RuntimeError(f"{fam.family}: the WordPiece trained on the corpus has {len(pieces)} pieces, not "
                           f"tiny.tokenizer.bpe_vocab_size = {size}: give a size the corpus reaches")
    vocab = dict(rows)
    for piece, _ in pieces:
        vocab.setdefault(piece, len(vocab))
    tokenizer = BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=max_length, **ROLES)
    for token, token_id in specials.items():
        if tokenizer.convert_tokens_to_ids(token) != token_id:
            raise RuntimeError(f"{fam.family}: special token {token!r} got id "
                               f"{tokenizer.convert_tokens_to_ids(token)}, not its declared {token_id}")
    return tokenizer
