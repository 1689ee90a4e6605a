"""Numbers in prose that name a checkpoint's config quantity, checked against that checkpoint's config.

"Seed-OSS-36B has 32 layers and 40 query heads" built green while its config says 64 and 80 (issue 48): a
sentence of a tagline or a note's prose that names one of the family's full-size checkpoints is read for
quantities (layers, query heads, kv heads, experts, top-k, width, context, vocabulary), and each number must be
the value the config of the checkpoint it names holds. A sentence that names no checkpoint (the tiny one's sizes,
"top 2 of 8" said of the family) names no config to hold it to and is left alone; a quantity the config does not
hold is left alone too, as no config says otherwise.
"""

from __future__ import annotations

import re
from typing import Any

from generator.facts.claim_error import ClaimError

_N = r"(\d{1,3}(?:,\d{3})+|\d+)(?:\s*(K|k)\b)?"
#: (pattern with the number as groups 1-2, the quantity's name, the config keys that hold it, in order)
QUANTITIES = (
    (rf"\b{_N}\s+(?:(?:decoder|transformer|hidden)\s+)?(?:layers|blocks)\b", "layers",
     ("num_hidden_layers", "n_layer", "num_layers")),
    (rf"\b{_N}\s+(?:key[- ]value|kv|KV)\s+heads\b", "kv heads", ("num_key_value_heads", "num_kv_heads")),
    (rf"\b{_N}\s+(?:query\s+|attention\s+)?heads\b", "heads", ("num_attention_heads", "n_head")),
    (rf"\b{_N}\s+(?:routed\s+)?experts\b", "experts", ("num_experts", "num_local_experts", "n_routed_experts")),
    (rf"\btop[- ]{_N}\b", "top-k", ("num_experts_per_tok", "top_k", "moe_top_k")),
    (rf"\b{_N}\s+experts\s+(?:per\s+token|active)\b", "top-k", ("num_experts_per_tok", "top_k")),
    (rf"\b(?:hidden\s+size|width|d_model)\s+(?:of\s+)?{_N}\b", "width", ("hidden_size", "n_embd", "d_model")),
    (rf"\b{_N}[- ]wide\b", "width", ("hidden_size", "n_embd", "d_model")),
    (rf"\b{_N}[- ]token\s+(?:context|window)\b", "context", ("max_position_embeddings", "n_positions")),
    (rf"\bcontext\s+(?:length\s+|window\s+)?of\s+{_N}\b", "context", ("max_position_embeddings", "n_positions")),
    (rf"\b{_N}[- ]token\s+vocabular", "vocabulary", ("vocab_size",)),
    (rf"\bvocabulary\s+of\s+{_N}\b", "vocabulary", ("vocab_size",)),
)


def _value(number: str, thousands: str | None) -> int:
    value = int(number.replace(",", ""))
    return value * 1024 if thousands else value  # "32K context": 32,768, as configs count it


def _config_value(config: dict, keys: tuple[str, ...]) -> Any:
    for source in (config.get("text_config") or {}, config):
        for key in keys:
            if isinstance(source.get(key), int):
                return source[key]
    return None


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n\s*\n", " ".join(text.split("\n"))) if s.strip()]


def checkpoint_names(family: Any) -> dict[str, str]:
    """How prose names each full-size checkpoint (its id, and the part after the organisation) -> its id."""
    names = {}
    for item in family.checkpoints:
        names[item["id"]] = item["id"]
        names.setdefault(item["id"].rsplit("/", 1)[-1], item["id"])
    return names


def check_numbers(family: Any, field: str, text: str) -> None:
    """Every quantity a sentence naming a checkpoint states is that checkpoint's config value, or a ClaimError naming
    the sentence, the number and the config's value."""
    names = checkpoint_names(family)
    # the longest name first: "Qwen3-30B-A3B-Instruct" is not read as "Qwen3-30B-A3B"
    by_length = sorted(names, key=len, reverse=True)
    for sentence in _sentences(text):
        named = [n for n in by_length if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", sentence)]
        ids = list(dict.fromkeys(names[n] for n in named))
        if len(ids) != 1:  # none, or two checkpoints compared in one sentence: which number is whose is not said
            continue
        bare = sentence
        for n in named:  # the name's own digits (36B) are not quantities
            bare = re.sub(rf"(?<![\w-]){re.escape(n)}(?![\w-])", " ", bare)
        config = family.checkpoint_config(ids[0])
        for pattern, quantity, keys in QUANTITIES:
            for found in re.finditer(pattern, bare, re.I):
                said, held = _value(found[1], found[2]), _config_value(config, keys)
                if held is not None and said != held:
                    raise ClaimError(family.family, f"{field} number {found[0]!r}",
                                     f"says {ids[0]} has {said:,} {quantity} (“{sentence[:160]}”), but its config's "
                                     f"{next(k for k in keys if _config_value(config, (k,)) is not None)} is {held:,}; "
                                     "write the config's number, or name the checkpoint the number is of")
