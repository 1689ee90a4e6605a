"""The tiny checkpoint's tokenizers for the RoBERTa-style encoders, built locally from the shared corpus.

``tiny.tokenizer.kind: roberta``: RoBERTa's byte-level BPE (GPT-2's split, no prefix space), as roberta-base's
vocab.json lays it out: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, the BPE's tokens, then ``<mask>`` last
(50264 of 50265); ``RobertaTokenizer`` frames a text as ``<s> A </s>`` and a pair as ``<s> A </s></s> B </s>``,
returns no token types and pads on the right. The BPE is trained by tokenizers' BpeTrainer on the corpus, as the
decoders' tiny tokenizers are (`tiny_tokenizer.build_tokenizer`: integer counting, the same files on every CPU).

``tiny.tokenizer.kind: pegasus``: Pegasus's SentencePiece unigram (``PegasusTokenizer``): XLM-R's counted pieces after
Pegasus's leading ids (``PEGASUS_LEADING``), a text framed as ``A </s>``.

``tiny.tokenizer.kind: marian``: a tokenizer.json with Marian's ids and framing (``MarianTokenizer`` needs sentencepiece,
not a requirement): XLM-R's counted pieces, ``</s>`` 0, ``<unk>`` 1, ``<pad>`` last, a text framed as ``A </s>``.

``tiny.tokenizer.kind: xlm_roberta``: XLM-R's SentencePiece unigram (``XLMRobertaTokenizer``: whitespace split,
``▁`` before every word), as its sentencepiece.bpe.model with fairseq's offset lays it out: ``<s>`` 0, ``<pad>`` 1,
``</s>`` 2, ``<unk>`` 3, the pieces, then ``<mask>`` last (250001 of 250002); a pair is framed as RoBERTa's. The
pieces are counted, not trained (UnigramTrainer's EM prunes in an order that is not promised across runs): every
character alone, then the corpus's most frequent words whole (``▁`` and the word), ties in alphabetical order,
each piece scored by the log of its relative frequency, so a word in the vocabulary is one piece and any other
falls back to its characters. The real tokenizer's normalizer (the model's precompiled NFKC map) is left out: the
corpus is plain ASCII text, which it leaves as it is.

``tiny.tokenizer.kind: t5``: T5's SentencePiece unigram (``T5Tokenizer``: the same split and counted pieces as
XLM-R's), as t5-small's spiece.model lays it out: ``<pad>`` 0, ``</s>`` 1, ``<unk>`` 2, the pieces, then the
sentinels ``<extra_id_N>`` ... ``<extra_id_0>`` last (the highest id is ``<extra_id_0>``); a text is ``A </s>``, no
BOS, padded on the right.

``tiny.tokenizer.kind: camembert``: CamemBERT's unigram (``CamembertTokenizer``, XLM-R's split), over the fairseq
dictionary camembert-base ships: ``<s>NOTUSED`` 0, ``<pad>`` 1, ``</s>NOTUSED`` 2, ``<unk>`` 3, then the
SentencePiece model's own ``<unk>NOTUSED`` 4, ``<s>`` 5 and ``</s>`` 6, the pieces (counted as XLM-R's are), and
``<mask>`` last (32004 of 32005).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

#: the ids RoBERTa's and XLM-R's vocabularies give their special tokens below the pieces; <mask> comes last
LEADING = ("<s>", "<pad>", "</s>", "<unk>")
MASK = "<mask>"
#: CamemBERT's: fairseq's four, the first and third unused, then the SentencePiece model's <unk>, <s> and </s>
CAMEMBERT_LEADING = ("<s>NOTUSED", "<pad>", "</s>NOTUSED", "<unk>", "<unk>NOTUSED", "<s>", "</s>")


def _declared(fam: Any, size: int, leading: tuple[str, ...] = LEADING) -> dict[str, int]:
    """The recipe's special tokens, checked against the layout above (``size`` pieces between them)."""
    specials = dict(fam.tiny["tokenizer"]["special_tokens"])
    expected = {**{token: i for i, token in enumerate(leading)}, MASK: len(leading) + size}
    if specials != expected:
        raise RuntimeError(f"{fam.family}: tiny.tokenizer.special_tokens must be {expected} (RoBERTa's layout with "
                           f"bpe_vocab_size = {size} pieces between them), not {specials}")
    return expected


def _max_length(fam: Any) -> int:
    """roberta-base's 512: the position table less the padding row and the rows below it."""
    config = fam.tiny["config"]
    return int(config.get("max_position_embeddings", 514)) - int(config.get("pad_token_id", 1)) - 1


def byte_level_bpe(fam: Any, corpus: str, size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """GPT-2's byte-level BPE (no prefix space) of ``size`` pieces trained on ``corpus``: its vocabulary by id and its
    merges (RoBERTa's and Whisper's tiny tokenizers)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE

    backend = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=1, special_tokens=[], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator([corpus], trainer=trainer)
    model = json.loads(backend.to_str())["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda item: item[1]))
    if len(vocab) != size:
        raise RuntimeError(f"{fam.family}: the BPE trained on the corpus has {len(vocab)} ids, not "
                           f"tiny.tokenizer.bpe_vocab_size = {size}")
    return vocab, [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]


def build_roberta_bpe(fam: Any, corpus: str) -> Any:
    """``RobertaTokenizer`` over a byte-level BPE of ``bpe_vocab_size`` tokens trained on ``corpus``."""
    from transformers import RobertaTokenizer

    size = fam.tiny["tokenizer"]["bpe_vocab_size"]
    specials = _declared(fam, size)
    vocab, merges = byte_level_bpe(fam, corpus, size)
    shifted = {token: len(LEADING) + i for token, i in vocab.items()}
    tokenizer = RobertaTokenizer(vocab={**{t: i for t, i in specials.items() if t != MASK}, **shifted,
                                        MASK: specials[MASK]}, merges=merges, model_max_length=_max_length(fam))
    return _checked(fam, tokenizer, specials)


def _pieces(pre_tokens: list[str], size: int) -> list[tuple[str, float]]:
    """``size`` scored pieces: every character, then the most frequent pre-tokens (``▁word``) whole."""
    words = Counter(pre_tokens)
    characters = Counter(c for word, n in words.items() for c in word for _ in range(n))
    letters = sum(characters.values())
    chars = [(c, round(math.log(characters[c] / letters), 6)) for c in sorted(characters)]
    total = sum(words.values())
    frequent = sorted((w for w in words if len(w) > 1), key=lambda w: (-words[w], w))
    whole = [(w, round(math.log(words[w] / total), 6)) for w in frequent]
    return (chars + whole)[:size]


def _unigram(fam: Any, corpus: str, cls: Any, leading: tuple[str, ...]) -> Any:
    """``cls`` over ``leading``, a unigram vocabulary of ``bpe_vocab_size`` pieces counted on ``corpus``, then
    ``<mask>``."""
    size = fam.tiny["tokenizer"]["bpe_vocab_size"]
    specials = _declared(fam, size, leading)
    splitter = cls().backend_tokenizer.pre_tokenizer  # whitespace, then ▁ before every word
    pieces = _pieces([token for token, _ in splitter.pre_tokenize_str(corpus)], size)
    if len(pieces) != size:
        raise RuntimeError(f"{fam.family}: the corpus gives {len(pieces)} unigram pieces, not "
                           f"tiny.tokenizer.bpe_vocab_size = {size}: give a size the corpus reaches")
    vocab = [(token, 0.0) for token in leading] + pieces + [(MASK, 0.0)]
    tokenizer = cls(vocab=vocab, model_max_length=_max_length(fam))
    return _checked(fam, tokenizer, specials)


#: the ids T5's vocabulary gives its special tokens below the pieces; the sentinels come last, in reverse
T5_LEADING = ("<pad>", "</s>", "<unk>")


def build_t5_unigram(fam: Any, corpus: str) -> Any:
    """``T5Tokenizer`` over a unigram vocabulary of ``bpe_vocab_size`` pieces counted on ``corpus``, then as many
    sentinels as the recipe declares (``<extra_id_0>`` ...)."""
    from transformers import T5Tokenizer, XLMRobertaTokenizer

    size = fam.tiny["tokenizer"]["bpe_vocab_size"]
    specials = dict(fam.tiny["tokenizer"]["special_tokens"])
    sentinels = sum(token.startswith("<extra_id_") for token in specials)
    expected = {**{token: i for i, token in enumerate(T5_LEADING)},
                **{f"<extra_id_{i}>": len(T5_LEADING) + size + sentinels - 1 - i for i in range(sentinels)}}
    if specials != expected:
        raise RuntimeError(f"{fam.family}: tiny.tokenizer.special_tokens must be {expected} (T5's layout with "
                           f"bpe_vocab_size = {size} pieces between them), not {specials}")
    splitter = XLMRobertaTokenizer().backend_tokenizer.pre_tokenizer  # T5's: whitespace, then ▁ before every word
    pieces = _pieces([token for token, _ in splitter.pre_tokenize_str(corpus)], size)
    if len(pieces) != size:
        raise RuntimeError(f"{fam.family}: the corpus gives {len(pieces)} unigram pieces, not "
                           f"tiny.tokenizer.bpe_vocab_size = {size}: give a size the corpus reaches")
    vocab = ([(token, 0.0) for token in T5_LEADING] + pieces
             + [(f"<extra_id_{i}>", 0.0) for i in reversed(range(sentinels))])
    tokenizer = T5Tokenizer(vocab=vocab, extra_ids=sentinels, model_max_length=512)
    return _checked(fam, tokenizer, expected)


def build_xlm_roberta_unigram(fam: Any, corpus: str) -> Any:
    """``XLMRobertaTokenizer`` over a unigram vocabulary of ``bpe_vocab_size`` pieces counted on ``corpus``."""
    from transformers import XLMRobertaTokenizer

    return _unigram(fam, corpus, XLMRobertaTokenizer, LEADING)


def build_camembert_unigram(fam: Any, corpus: str) -> Any:
    """``CamembertTokenizer`` over CamemBERT's seven leading ids and ``bpe_vocab_size`` counted pieces."""
    from transformers import CamembertTokenizer

    return _unigram(fam, corpus, CamembertTokenizer, CAMEMBERT_LEADING)


#: PegasusTokenizer's ids below the pieces: <pad> 0, </s> 1, the two mask tokens, then <unk> (the real one reserves
#: 101 ids <unk_2> ... <unk_102> between the masks and the pieces, its offset 103; the tiny one reserves none)
PEGASUS_LEADING = ("<pad>", "</s>", "<mask_1>", "<mask_2>", "<unk>")


def build_pegasus_unigram(fam: Any, corpus: str) -> Any:
    """``PegasusTokenizer`` over ``bpe_vocab_size`` unigram pieces counted on ``corpus`` (XLM-R's counting), after
    `PEGASUS_LEADING` and with no reserved ids (offset 0): it frames a text as ``A </s>``, no BOS."""
    from transformers import PegasusTokenizer

    size = fam.tiny["tokenizer"]["bpe_vocab_size"]
    specials = dict(fam.tiny["tokenizer"]["special_tokens"])
    expected = {token: i for i, token in enumerate(PEGASUS_LEADING)}
    if specials != expected:
        raise RuntimeError(f"{fam.family}: tiny.tokenizer.special_tokens must be {expected} (Pegasus's leading ids, "
                           f"no reserved <unk_i>), not {specials}")
    # its normalizer (newlines and runs of spaces to one space), then Metaspace: ▁ before every word
    backend = PegasusTokenizer(vocab=[(token, 0.0) for token in PEGASUS_LEADING], offset=0).backend_tokenizer
    text = backend.normalizer.normalize_str(corpus)
    pieces = _pieces([token for token, _ in backend.pre_tokenizer.pre_tokenize_str(text)], size)
    if len(pieces) != size:
        raise RuntimeError(f"{fam.family}: the corpus gives {len(pieces)} unigram pieces, not "
                           f"tiny.tokenizer.bpe_vocab_size = {size}: give a size the corpus reaches")
    vocab = [(token, 0.0) for token in PEGASUS_LEADING] + pieces
    tokenizer = PegasusTokenizer(vocab=vocab, offset=0,
                                 model_max_length=int(fam.tiny["config"].get("max_position_embeddings", 512)))
    return _checked(fam, tokenizer, specials)


def build_marian_unigram(fam: Any, corpus: str) -> Any:
    """A tokenizer.json with ``MarianTokenizer``'s ids and framing over ``bpe_vocab_size`` unigram pieces counted on
    ``corpus`` (XLM-R's counting): ``</s>`` 0, ``<unk>`` 1, the pieces, ``<pad>`` last, ▁ before every word, a text
    framed as ``A </s>``. Not MarianTokenizer itself: that class needs sentencepiece, which nncanon does not require."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import Unigram
    from transformers import PreTrainedTokenizerFast

    size = fam.tiny["tokenizer"]["bpe_vocab_size"]
    specials = dict(fam.tiny["tokenizer"]["special_tokens"])
    expected = {"</s>": 0, "<unk>": 1, "<pad>": size + 2}
    if specials != expected:
        raise RuntimeError(f"{fam.family}: tiny.tokenizer.special_tokens must be {expected} (Marian's layout with "
                           f"bpe_vocab_size = {size} pieces between them), not {specials}")
    splitter = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    pieces = _pieces([token for token, _ in splitter.pre_tokenize_str(corpus)], size)
    if len(pieces) != size:
        raise RuntimeError(f"{fam.family}: the corpus gives {len(pieces)} unigram pieces, not "
                           f"tiny.tokenizer.bpe_vocab_size = {size}: give a size the corpus reaches")
    backend = Tokenizer(Unigram([("</s>", 0.0), ("<unk>", 0.0), *pieces, ("<pad>", 0.0)], unk_id=1))
    backend.pre_tokenizer = splitter
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A $B </s>",
                                                           special_tokens=[("</s>", 0)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>",
                                        pad_token="<pad>",
                                        model_max_length=int(fam.tiny["config"].get("max_position_embeddings", 512)))
    return _checked(fam, tokenizer, specials)


def _checked(fam: Any, tokenizer: Any, specials: dict[str, int]) -> Any:
    tokenizer.padding_side = "right"
    for token, token_id in specials.items():
        if tokenizer.convert_tokens_to_ids(token) != token_id:
            raise RuntimeError(f"{fam.family}: special token {token!r} got id "
                               f"{tokenizer.convert_tokens_to_ids(token)}, not its declared {token_id}")
    return tokenizer
