"""The words of a tagline or a note that claim a property the build checks, read by meaning, not by one spelling.

Each :class:`Phrase` is every wording found for one claim (issue 48: OLMoE, which does not renormalise, passed with
"re-normalized to sum to one" because only the stem ``renormali[sz]`` was read) and the check on the facts that must
hold for the page to say it: norm kind ("RMSNorm", "RMS-normed", "root-mean-square"; "LayerNorm", "layer norm"), MLP
kind ("SwiGLU", "gated MLP", "GLU"; "non-gated", "an MLP with no gate"), tied head ("tied", "shares its embedding
with the head"; "untied", "a separate head"), softcap ("softcapped", "capped with a tanh"), window ("sliding window",
"windowed attention", "local attention", "attends to the last 4096"), rotary fraction ("a quarter of each head",
"40% of each head", "half-rotary", "on every dimension") and renormalised routing. A negation up to two words
before a negatable phrase, in the same clause, claims the opposite.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from generator.facts.claim_error import ClaimError

# a negation up to two words before, in the same clause ("LayerNorms in place of RMSNorms" says no RMSNorm)
_CONTRAST = re.compile(r"\b(not|instead of|in place of|rather than)\s*$", re.I)
_NEGATION = re.compile(r"\b(no|not|nothing|without|never|none|neither|nor|instead of|in place of|rather than)\b([^\w,.;:()]+\w+){0,2}[^\w,.;:()]*$", re.I)


@dataclass(frozen=True)
class Phrase:
    pattern: str
    says: str  #: what the phrase claims, for the error
    holds: Callable[[Any, re.Match], Any]  #: on the Evidence (generator/facts/tags.py) and the phrase's match
    #: "not renormalised", "nothing is softcapped": a negation before it claims the opposite (``_NEGATION``)
    negatable: bool = False
    #: a kind of norm is negated only right before it ("in place of RMSNorms"): "no LayerNorm on the embeddings" says
    #: nothing of the blocks' norms
    contrast_only: bool = False


def _gelu(e: Any) -> bool:
    return any(a.startswith("gelu") for a in e.activations)


def _softcapped(e: Any) -> bool:
    """Softcapped scores or logits: measured, or a proven relation capping by a tanh (RecurrentGemma's
    logits == logits_soft_cap · tanh(lm_head_output / logits_soft_cap), a config field of another name)."""
    return bool({"softcapped scores", "final logit softcap"} & set(e.traits["block"])
                or re.search(r"== (\w+) · tanh\([^)]*/ \1\)", e.relations))


def _tied(e: Any) -> bool:
    return e.on(True, lambda c: c["tie_word_embeddings"])


def _rotary_fraction(e: Any) -> float:
    """The fraction of each head the rotary turns, as measured (traits: "partial rotary (0.25)"), 1 when whole."""
    return next((float(x[len("partial rotary ("):-1]) for x in e.traits["attention"] if x.startswith("partial rotary (")),
                1.0)


_FRACTIONS = {"quarter": 0.25, "half": 0.5, "third": 1 / 3, "three quarters": 0.75}


def _said_fraction(words: str) -> float:
    words = re.sub(r"^(?:a|one)\s+", "", " ".join(words.lower().split()))
    if words.endswith("%"):
        return float(words[:-1].strip()) / 100
    return _FRACTIONS[words]


_PLAIN_MLP = r"(?:MLP|feed[- ]?forward|FFN)"
PHRASES = (
    Phrase(r"\bRMS[- ]?Norm\w*|\broot[- ]mean[- ]square\b", "an RMSNorm", lambda e, m: "RMSNorm" in e.norms(),
           negatable=True, contrast_only=True),
    # a hyphen before it makes it part of a name of its own (HyperCLOVA X's Peri-Layer Normalization)
    Phrase(r"(?<!RMS )(?<!RMS-)(?<!square )(?<!-)\blayer[- ]?norm\w*|(?<!-)\blayer\s+normali[sz]\w*", "a LayerNorm",
           lambda e, m: "LayerNorm" in e.norms(), negatable=True, contrast_only=True),
    Phrase(r"\bSwiGLU\b", "a gated MLP with silu", lambda e, m: "clamped_swiglu" in e.relations or (
        re.search("gated|mixture", e.traits["mlp"]) and "silu" in e.activations) or (
        e.facts.get("vision") is not None and "act_fn(gate_proj" in e.relations)),
    Phrase(r"\bGeGLU\b", "a gated MLP with a GELU", lambda e, m: "gated" in e.traits["mlp"] and _gelu(e)),
    Phrase(r"\bGELU\b", "a GELU", lambda e, m: _gelu(e)),
    Phrase(rf"(?<![\w-])gated\s+{_PLAIN_MLP}s?\b|\bgated\s+linear\s+units?\b|\bGLU\b", "a gated MLP",
           lambda e, m: re.search("gated|mixture", e.traits["mlp"]), negatable=True),
    Phrase(rf"\b(?:non-gated|ungated)\s+(?:\w+\s+)?{_PLAIN_MLP}|\b{_PLAIN_MLP}\s+(?:that\s+is\s+)?not\s+gated\b|"
           rf"\b{_PLAIN_MLP}\s+(?:that\s+has\s+|with\s+)no\s+gate\b", "a plain MLP (no gate)",
           lambda e, m: "plain" in e.traits["mlp"]),
    Phrase(r"\bsoft[- ]?cap\w*|\btanh[- ]cap\w*|\bcap(?:s|ped|ping)?\s+(?:\w+\s+){0,3}?(?:with|by|through)\s+(?:a\s+)?tanh",
           "a softcap", lambda e, m: _softcapped(e), negatable=True),
    Phrase(r"\bti(?:e|es|ed|ing)\b|\bweight[- ]tying\b|\b(?:shares?|reuses?)\s+(?:\w+\s+){0,2}?embeddings?\s+"
           r"(?:matrix\s+|weights?\s+)?(?:with|as)\s+(?:\w+\s+){0,2}?(?:head|lm_head|unembedding)",
           "tied embeddings", lambda e, m: _tied(e), negatable=True),
    Phrase(r"\buntied\b|\b(?:separate|independent|distinct)\s+(?:output\s+)?(?:head|lm_head|unembedding)\b",
           "an untied head", lambda e, m: e.on(True, lambda c: not c["tie_word_embeddings"])),
    Phrase(r"\bsliding[- ](?:attention )?window|\bwindowed\s+attention|\blocal\s+attention\b|"
           r"\battends?\s+(?:only\s+)?(?:to|over)\s+(?:the\s+)?(?:last|previous)\s+[\d,]+",
           "a sliding window", lambda e, m: e.on(True, e.windowed) or "window" in e.text_relations, negatable=True),
    Phrase(r"\bgrouped-query\b", "fewer kv heads than heads", lambda e, m: "grouped-query" in e.traits["attention"]),
    Phrase(r"\bsandwich", "sandwich norms", lambda e, m: "sandwich norms" in e.traits["block"]),
    Phrase(r"\bmixture\b", "a mixture MLP", lambda e, m: "mixture" in e.traits["mlp"], negatable=True),
    Phrase(r"\bshared expert\b", "a shared expert", lambda e, m: "shared expert" in e.traits["mlp"], negatable=True),
    Phrase(r"\brotary\s+embedding\s+on\s+every\s+dimension|\bfull[- ]rotary\b|"
           r"\brotary\b[^.;:]{0,40}?\bon\s+(?:all|every)\s+(?:of\s+)?(?:the\s+)?(?:head\s+)?dimensions?\b",
           "a full rotary", lambda e, m: _rotary_fraction(e) == 1.0),
    Phrase(r"\bpartial(?:ly)?[- ]rotary\b|\bhalf[- ]rotary\b", "a partial rotary",
           lambda e, m: _rotary_fraction(e) < (0.5 + 1e-6 if m[0].lower().startswith("half") else 1.0)
           and (not m[0].lower().startswith("half") or abs(_rotary_fraction(e) - 0.5) < 0.01)),
    Phrase(r"\b(?:rotary|RoPE|rotat\w*)\b[^.;:]{0,40}?\bon\s+(?:only\s+)?(?:the\s+first\s+)?"
           r"((?:a\s+|one\s+)?(?:quarter|half|third|three\s+quarters)|\d+(?:\.\d+)?\s*%)\s+of\s+(?:each|every|the|its)\b",
           "that rotary fraction", lambda e, m: abs(_rotary_fraction(e) - _said_fraction(m[1])) < 0.01),
)
#: the norm kinds: what a sentence about the vision tower is held to (its blocks' norms, measured)
NORM_PHRASES = PHRASES[:2]
ROUTING_PHRASES = (
    # "renormalised", "re-normalized", "normalized to sum to one", "rescaled so they sum to 1" all claim the chosen
    # weights are renormalised
    Phrase(r"\bre-?normali[sz]|\b(?:normali[sz]|rescal)\w*(?:\s+\w+){0,4}?\s+sums?\s+to\s+(?:one|1)\b",
           "top-k weights renormalised", lambda e, m: e.renormalised() is not False, negatable=True),
)


def _generic(text: str, found: re.Match) -> bool:
    """The phrase names the kind itself, in a possessive no "the" or "its" points at this model ("which a SwiGLU's
    neurons almost never are", "the sigmoid approximation of GELU's gain"): a statement about the kind, not this
    family's."""
    if not re.match(r"['’]s\b", text[found.end():found.end() + 3]):
        return False
    return not re.search(r"\b(?:the|its|this|each|every)\s+$", text[max(0, found.start() - 12):found.start()], re.I)


def check_phrases(family: str, field: str, text: str, evidence: Any, phrases: tuple[Phrase, ...]) -> None:
    """Each phrase of ``text`` that names a checkable property holds (or, negated, does not)."""
    for phrase in phrases:
        for found in re.finditer(phrase.pattern, text, re.I):
            if phrase in ROUTING_PHRASES and evidence.renormalised() is None:
                continue  # no routing relation on this family: nothing to hold the word to
            if _generic(text, found):
                continue
            negation = _CONTRAST if phrase.contrast_only else _NEGATION
            negated = phrase.negatable and negation.search(text[max(0, found.start() - 40):found.start()])
            if negated and re.search(r"\bthe\b", negated[0], re.I):
                negated = None  # "the block, not the mixture, calls it": the mixture is there, only not the subject
            holds = bool(phrase.holds(evidence, found))
            if holds == bool(negated):
                start = max(0, found.start() - 30)
                quote = text[start:found.end() + 20].strip()
                claim = f"no {phrase.says}" if negated else phrase.says
                word = found[0] + re.match(r"\w*", text[found.end():])[0]  # the whole word: "renormalized"
                shown = {k: v for k, v in evidence.traits.items() if k != "checkpoints"}
                raise ClaimError(family, f"{field} phrase {word!r}", f"says {claim} (…{quote}…), which the "
                                                                         f"measured traits {shown} and relations "
                                                                         "contradict")
