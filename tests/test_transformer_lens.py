"""TransformerLens names, checked: for every family, each value nncanon maps to a TransformerLens 4.3 hook
(generator/facts/tl_names.py) equals what TransformerBridge's run_with_cache holds there, on the tiny checkpoint.

An optional extra of the library (``pip install nncanon[transformer-lens]``), which `make setup` installs, so `make test` runs these as CI does; skipped without it. A family
TransformerLens does not bridge (its adapter refuses the model) is reported as such; the families the issue
names (llama, qwen3, qwen3_moe) must be bridged and agree everywhere."""

from __future__ import annotations

import functools

import pytest

from generator.facts.tl_names import annotations, installed
from generator.recipe.family import all_families

pytestmark = pytest.mark.skipif(not installed(), reason="needs the transformer-lens extra (pip install "
                                                        "nncanon[transformer-lens])")
#: the families the issue checked by hand: every mapped value agrees
EVERY_VALUE = {"llama", "qwen3", "qwen3_moe", "gpt2"}
#: on every family TransformerLens bridges: the residual stream, the pattern and the logits agree. A hook that
#: means something else on a family (gemma2's hook_mlp_out is after its post-feedforward norm) disagrees, and the
#: facts say so on that row
CORE = {"layer_input", "layer_mid", "layer_output", "attention_probabilities", "logits"}
#: core hooks TransformerBridge 4.3 fills with another tensor on a family, measured (their rows say "differ"), not yet
#: traced to the hook's placement: Nemotron-H's one-sublayer attention blocks (hook_pattern), RecurrentGemma's
#: hook_resid_mid around the temporal block. Traced: BERT's hook_resid_mid is ln2.hook_in, the MLP's add before the
#: block's second LayerNorm (mlp_input + mlp_output); layer_mid, the attention's add before its LayerNorm, is the
#: bridge's ln1.hook_in (measured on the tiny checkpoint, every other core hook agreeing). RoBERTa's adapter is BERT's
#: block under roberta.*, traced the same: its hook_resid_mid is ln2.hook_in (mlp_input + mlp_output), layer_mid its
#: ln1.hook_in. GPT-1's (openai_gpt) post-norm block, traced the same way on its tiny checkpoint: the bridge's
#: hook_resid_mid is mlp.hook_in, ln_1's output (mlp_norm_output), and layer_mid, the attention's add before ln_1, its
#: ln1.hook_in; its blocks return a list, whose output the bridge does not hook (no hook_resid_post in the cache), and
#: layer_output, ln_2's output, is its ln2.hook_out
KNOWN_TO_DIFFER = {("nemotron_h", "attention_probabilities"), ("recurrent_gemma", "layer_mid"), ("bert", "layer_mid"),
                   ("roberta", "layer_mid"), ("openai_gpt", "layer_mid"), ("openai_gpt", "layer_output")}


#: every family and each of its variants ("opt.350m": the Layouts table's TransformerLens column), as the build checks
#: them (generator/build.py), by name
FAMILIES = {f.family: f for f in all_families()}
VARIANTS = {v.family: v for f in FAMILIES.values() for v in [f.variant(x["name"]) for x in f.variants]}
CHECKED = FAMILIES | VARIANTS
#: the families in this many shares, one check (one process booting each share's bridges) per share, so no test runs
#: the whole check (~45 CPU-s, past 120 s beside the browser tests' Chromium): the suite's unit runs this module
#: before tests/test_build.py, whose site build then reads every result from the shared cache
SHARES = 2


def _share(name: str) -> int:
    """A family's share by its place in the sorted names; a variant's is the last (a share is one process: its boot, ~8 s,
    is paid once per share)."""
    return sorted(FAMILIES).index(name) * SHARES // len(FAMILIES) if name in FAMILIES else SHARES - 1


@pytest.fixture(scope="module")
def check_share(tmp_path_factory):
    # the build's own check (tl_names.annotations): `check` run in one process for every family of the share whose
    # result is not saved under its key (the family's fact sources, the releases, tl_names' code, the CPU capability)
    # in $NNCANON_CACHE/transformer_lens. A suite that ran before on unchanged sources does not boot every bridge a
    # second time; a changed family is checked anew
    @functools.cache
    def checked(share: int) -> dict[str, dict]:
        return annotations([f for name, f in CHECKED.items() if _share(name) == share],
                           tmp_path_factory.mktemp("transformer_lens"), progress=lambda line: None)

    return checked


@pytest.fixture
def checked(check_share, family) -> dict[str, dict]:
    return check_share(_share(family))


@pytest.mark.parametrize("family", sorted(VARIANTS))
def test_each_variant_is_checked(family, checked):
    """A variant's rows (the Layouts table's column): every mapped value checked, agreeing or differing, or the
    variant is one TransformerLens does not bridge, said as such."""
    found = checked[family]
    assert found, f"{family}: no value is mapped to a TransformerLens hook"
    for key, entry in found.items():
        assert entry["agreed"] is not None or entry["why"].startswith("TransformerLens does not bridge"), (key, entry)


@pytest.mark.parametrize("family", sorted(FAMILIES))
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
        return
    must = {key: entry for key, entry in found.items()
            if family in EVERY_VALUE or (key.split("::")[1] in CORE and (family, key.split("::")[1]) not in KNOWN_TO_DIFFER)}
    assert must, found
    wrong = {key: entry for key, entry in must.items() if not entry["agreed"]}
    assert not wrong, f"{family}: {wrong}"
    # each stack's first block input (an encoder-decoder's two: encoder_blocks, decoder_blocks), and the logits
    hooks = {key: entry["hook"] for key, entry in found.items()}
    inputs = [hook for key, hook in hooks.items() if key.endswith("::layer_input")]
    assert inputs and all(hook.endswith("blocks.{i}.hook_resid_pre") for hook in inputs), inputs
    assert hooks["model::logits"] == "logits"
