"""TransformerLens names, checked: each value nncanon maps to a TransformerLens 4.3 hook (generator/facts/tl_names.py)
equals what TransformerBridge's run_with_cache holds there, on the tiny checkpoint.

``make site`` runs the check on every family and variant and refuses a disagreement (generator/facts/tl_agreement.py);
here it runs on a sample chosen to reach every rule: the families checked by hand, each family with a core hook
known to differ, each kind of model (an encoder-decoder's two stacks, an image-text model, a selective scan, a speech
model, one the bridge refuses) and a variant the bridge runs and one it cannot. The rules are the build's; the
assertions below restate them from the results, so a rule the build dropped still fails here.

An optional extra of the library (``pip install nncanon[transformer-lens]``), which `make setup` installs, so
`make test` runs these as CI does; skipped without it."""

from __future__ import annotations

import pytest

from generator.facts.tl_agreement import (
    CORE,
    EVERY_VALUE,
    KNOWN_TO_DIFFER,
    TransformerLensError,
    require_agreement,
)
from generator.facts.tl_names import annotations, installed
from generator.recipe.family import get_family

pytestmark = pytest.mark.skipif(not installed(), reason="needs the transformer-lens extra (pip install "
                                                        "nncanon[transformer-lens])")
#: every rule's case: the hand-checked families, each core difference, and one family of each kind
FAMILIES = sorted(EVERY_VALUE | {family for family, _ in KNOWN_TO_DIFFER}
                  | {"t5", "llava", "mamba", "whisper", "qwen3_5_moe_text"})
#: a variant the bridge runs (Falcon-RW's ALiBi) and one whose forward it cannot run (OPT-350m's projected embeddings)
VARIANTS = ["falcon.rw", "opt.350m"]


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, dict]:
    # the build's own check (tl_names.annotations), in one process for the sample: results saved under their keys in
    # $NNCANON_CACHE/transformer_lens are read, not checked again
    chosen = [get_family(name) for name in FAMILIES]
    chosen += [get_family(name.split(".")[0]).variant(name.split(".")[1]) for name in VARIANTS]
    return annotations(chosen, tmp_path_factory.mktemp("transformer_lens"), progress=lambda line: None)


def test_the_sample_holds_the_builds_rules(checked):
    require_agreement(checked)


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_is_checked(variant, checked):
    """A variant's rows (the Layouts table's column): every mapped value checked, agreeing or differing, or the
    variant is one TransformerLens does not bridge, said as such."""
    found = checked[variant]
    assert found, f"{variant}: no value is mapped to a TransformerLens hook"
    for key, entry in found.items():
        assert entry["agreed"] is not None or entry["why"].startswith("TransformerLens does not bridge"), (key, entry)
    bridged = {key: entry for key, entry in found.items() if entry["agreed"] is not None}
    assert (variant == "falcon.rw") == bool(bridged), found
    assert all(entry["agreed"] for key, entry in bridged.items() if key.split("::")[1] in CORE), bridged


@pytest.mark.parametrize("family", FAMILIES)
def test_transformer_lens_hooks_hold_the_same_tensors(family, checked):
    found = checked[family]
    assert found, f"{family}: no value is mapped to a TransformerLens hook"
    unbridged = {key: entry for key, entry in found.items() if entry["agreed"] is None}
    for key, entry in unbridged.items():
        assert entry["why"].startswith(f"TransformerLens does not bridge {family}"), (key, entry)
    if family in EVERY_VALUE:
        assert not unbridged, unbridged
    if unbridged:
        assert len(unbridged) == len(found), "a family is bridged or not, not value by value"
        assert family in {"whisper", "qwen3_5_moe_text"}, f"{family} is bridged on TransformerLens 4.3"
        return
    must = {key: entry for key, entry in found.items()
            if family in EVERY_VALUE or (key.split("::")[1] in CORE and (family, key.split("::")[1]) not in KNOWN_TO_DIFFER)}
    assert must, found
    wrong = {key: entry for key, entry in must.items() if not entry["agreed"]}
    assert not wrong, f"{family}: {wrong}"
    # each known difference is measured as one: a hook the bridge now fills with our tensor leaves the set
    differ = {name for (f, name) in KNOWN_TO_DIFFER if f == family}
    assert differ == {key.split("::")[1] for key, entry in found.items() if key.split("::")[1] in CORE
                      and not entry["agreed"]}, found
    # each stack's first block input (an encoder-decoder's two: encoder_blocks, decoder_blocks), and the logits
    hooks = {key: entry["hook"] for key, entry in found.items()}
    inputs = [hook for key, hook in hooks.items() if key.endswith("::layer_input")]
    assert inputs and all(hook.endswith("blocks.{i}.hook_resid_pre") for hook in inputs), inputs
    assert len(inputs) == (2 if family == "t5" else 1), inputs
    assert hooks["model::logits"] == "logits"


def _llama(agreed: bool | None, value: str = "layer_mid", why: str = "") -> dict[str, dict]:
    entry = {"hook": "blocks.{i}.hook_resid_mid", "agreed": agreed, "error": None, **({"why": why} if why else {})}
    return {"llama": {f"model.layers[i]::{value}": entry,
                      "model::logits": {"hook": "logits", "agreed": True if agreed is not None else None,
                                        "error": "0", **({"why": why} if why else {})}}}


@pytest.mark.parametrize("results, says", [
    (_llama(False), "llama: claim TransformerLens names: model.layers[i]::layer_mid: TransformerLens's "
                    "blocks.{i}.hook_resid_mid holds another tensor"),
    (_llama(None, why="TransformerLens does not bridge llama: ValueError: no"), "llama: claim TransformerLens names: "
                                                                               "must be bridged"),
    ({"opt": {"model.layers[i]::layer_mid": {"hook": "h", "agreed": None, "why": "TransformerLens does not bridge opt"},
              "model::logits": {"hook": "logits", "agreed": True, "error": "0"}}}, "a family is bridged or not"),
    ({"opt": {}}, "opt: claim TransformerLens names: no value is mapped"),
])
def test_a_disagreement_fails_the_build_in_one_line(results, says):
    with pytest.raises(TransformerLensError) as raised:
        require_agreement(results)
    assert says in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


def test_a_known_difference_and_a_non_core_hook_may_differ():
    require_agreement({"bert": _llama(False)["llama"],
                       "gemma2": {"model.layers[i].mlp::mlp_output": {"hook": "blocks.{i}.hook_mlp_out",
                                                                      "agreed": False, "error": None}}})
