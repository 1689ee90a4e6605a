"""What the build requires of the TransformerLens check (generator/facts/tl_names.py): a standard value and the
TransformerLens hook it is mapped to hold the same tensor, so a name that means something else fails the build.

``make site`` checks every family and variant and refuses a disagreement in one line (:func:`require_agreement`);
the suite's builds show the results their build directory keeps and check none (``NNCANON_TL=kept``), and
tests/test_transformer_lens.py runs the check on a sample. So every family is proven where CI runs ``make site``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.recipe.family import Family

#: ``kept``: the pages show the TransformerLens results the build directory keeps and the build checks none. The
#: suite's builds set it (tests/conftest.py): ``make site`` checks every family, tests/test_transformer_lens.py a
#: sample
TL_ENV = "NNCANON_TL"

#: the families checked by hand when the mapping was written: every mapped value agrees, and they are bridged
EVERY_VALUE = {"llama", "qwen3", "qwen3_moe", "gpt2"}
#: on every family and variant TransformerLens bridges: the residual stream, the pattern and the logits agree. A
#: hook that means something else on a family (gemma2's hook_mlp_out is after its post-feedforward norm) may
#: disagree outside these, and the page says so on that row
CORE = {"layer_input", "layer_mid", "layer_output", "attention_probabilities", "logits"}
#: core hooks TransformerBridge 4.3 fills with another tensor on a family, measured (their rows say "differ"):
#: - Nemotron-H's one-sublayer attention blocks (hook_pattern), RecurrentGemma's hook_resid_mid around the
#:   temporal block: not yet traced to the hook's placement;
#: - BERT's hook_resid_mid is ln2.hook_in, the MLP's add before the block's second LayerNorm (mlp_input +
#:   mlp_output); layer_mid, the attention's add before its LayerNorm, is the bridge's ln1.hook_in (measured on
#:   the tiny checkpoint, every other core hook agreeing). RoBERTa's adapter is BERT's block under roberta.*,
#:   traced the same;
#: - GPT-1's (openai_gpt) post-norm block: the bridge's hook_resid_mid is mlp.hook_in, ln_1's output
#:   (mlp_norm_output), and layer_mid, the attention's add before ln_1, its ln1.hook_in; its blocks return a list,
#:   whose output the bridge does not hook (no hook_resid_post in the cache), and layer_output, ln_2's output, is
#:   its ln2.hook_out
KNOWN_TO_DIFFER = {("nemotron_h", "attention_probabilities"), ("recurrent_gemma", "layer_mid"), ("bert", "layer_mid"),
                   ("roberta", "layer_mid"), ("openai_gpt", "layer_mid"), ("openai_gpt", "layer_output")}


class TransformerLensError(ClaimError):
    """A standard value and its TransformerLens hook hold different tensors where they must agree."""


def disagreements(family: str, found: dict[str, dict]) -> list[str]:
    """What does not hold of one family's (or variant's, ``opt.350m``) check result, one phrase each; [] if all
    does. The rules: every mapped value checked; a family bridged whole or not at all; the hand-checked families
    bridged and agreeing everywhere; every core hook agreeing but the known differences."""
    if not found:
        return ["no value is mapped to a TransformerLens hook"]
    unbridged = [key for key, entry in found.items() if entry["agreed"] is None]
    if unbridged:
        problems = [f"{key} was not checked: {found[key].get('why') or 'no reason given'}" for key in unbridged
                    if not found[key].get("why", "").startswith("TransformerLens does not bridge")]
        if problems:
            return problems
        if len(unbridged) != len(found):
            return [f"bridged for some values only ({len(found) - len(unbridged)} of {len(found)}): a family is "
                    f"bridged or not"]
        if family in EVERY_VALUE:
            return [f"must be bridged: {min(found[key].get('why', '') for key in unbridged)}"]
        return []
    return [f"{key}: TransformerLens's {entry['hook']} holds another tensor ({entry.get('why') or 'outside ±1e-5'})"
            for key, entry in sorted(found.items())
            if not entry["agreed"] and (family in EVERY_VALUE or (key.split("::")[1] in CORE
                                                                  and (family, key.split("::")[1]) not in KNOWN_TO_DIFFER))]


def require_agreement(results: dict[str, dict[str, dict]]) -> None:
    """Refuse the first family whose check does not hold, in one line naming it, the value and the hook."""
    for family, found in sorted(results.items()):
        problems = disagreements(family, found)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise TransformerLensError(family, "TransformerLens names", f"{problems[0]}{more}")


def for_the_site(families: list[Family], directory: Path,
                 progress: Callable[[str], Any] = print) -> dict[str, dict[str, dict]] | None:
    """Each family's and variant's TransformerLens results for its page, checked where not kept (every one on a
    fresh build directory, ``make site``'s) and required to agree; only those kept under ``NNCANON_TL=kept``."""
    from generator.facts.tl_names import annotations, kept

    if os.environ.get(TL_ENV) == "kept":
        return kept(families, directory)
    results = annotations(families, directory, progress)
    if results is not None:
        require_agreement(results)
    return results
