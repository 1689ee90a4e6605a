"""The tiny checkpoint's WordPiece tokenizer, for the encoder families whose real tokenizer is BERT's
(``tiny.tokenizer.kind: wordpiece``): lowercased, accents stripped, split on whitespace and punctuation, each
word cut into the longest pieces the vocabulary holds (``##`` continuing a word), ``[CLS] A [SEP] B [SEP]``
around a pair with token_type_ids 0 then 1, padding on the right.

bert-base-uncased's vocab.txt puts ``[PAD]`` at 0, ``[unused0]`` .. ``[unused98]`` at 1-99, ``[UNK]`` 100,
``[CLS]`` 101, ``[SEP]`` 102, ``[MASK]`` 103 and the pieces after them; the tiny vocabulary keeps that layout
(the special tokens at their real ids, the unused rows between them), then the pieces a WordPiece trainer finds
on the shared corpus (`CORPUS`): every character, alone and continuing a word (``##e``), then the corpus's most
frequent words whole, ties in alphabetical order. tokenizers' WordPieceTrainer is not used: it breaks ties between
equally frequent merges in a hash map's order, so two runs give two vocabularies and the pin would not hold. The
counting here gives the same files on every run and every CPU.
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


def _pieces(corpus: str, size: int) -> list[str]:
    """``size`` pieces: the characters, the characters continuing a word, then the most frequent whole words."""
    from collections import Counter

    from tokenizers import normalizers, pre_tokenizers

    text = normalizers.BertNormalizer(lowercase=True).normalize_str(corpus)
    words = Counter(word for word, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text))
    characters = sorted({c for word in words for c in word})
    pieces = characters + [f"##{c}" for c in characters]
    frequent = sorted((w for w in words if len(w) > 1), key=lambda w: (-words[w], w))
    return (pieces + frequent)[:size]


def build_wordpiece(fam: Any, corpus: str, max_length: int) -> Any:
    """``BertTokenizer`` over a WordPiece vocabulary of the reserved rows then ``bpe_vocab_size`` counted pieces."""
    from transformers import BertTokenizer

    recipe = fam.tiny["tokenizer"]
    specials = dict(recipe["special_tokens"])
    missing = sorted(set(ROLES.values()) - set(specials))
    if missing:
        raise RuntimeError(f"{fam.family}: a WordPiece tokenizer needs {', '.join(missing)} in "
                           "tiny.tokenizer.special_tokens")
    rows = reserved(specials)
    size = recipe["bpe_vocab_size"]
    pieces = _pieces(corpus, size)
    if len(pieces) != size:
        raise RuntimeError(f"{fam.family}: the corpus gives {len(pieces)} WordPiece pieces, not "
                           f"tiny.tokenizer.bpe_vocab_size = {size}: give a size the corpus reaches")
    vocab = dict(rows)
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    tokenizer = BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=max_length, **ROLES)
    for token, token_id in specials.items():
        if tokenizer.convert_tokens_to_ids(token) != token_id:
            raise RuntimeError(f"{fam.family}: special token {token!r} got id "
                               f"{tokenizer.convert_tokens_to_ids(token)}, not its declared {token_id}")
    return tokenizer
