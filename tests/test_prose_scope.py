"""issue 48: the notes' prose is checked by meaning, each sentence scoped to what it describes
(generator/facts/prose_scope.py). Held to every phrase the tagline is, the notes refused about 15 true sentences:
they describe other families, a backend, the vision tower. Each of those is accepted; a claim about the family's
own blocks is refused when false in every wording and accepted when true; the same false words said of another
family, a backend or the vision connector are no claim about this one. Read from the facts `verify` collected."""

from __future__ import annotations

import json

import pytest
from test_meaning import PARAPHRASES, with_yaml

pytestmark = pytest.mark.slow

#: (family, notes file, a true sentence of it that every tag phrase, unscoped, refused)
TRUE_SENTENCES = [
    ("arcee", "arcee.notes.md", "which a SwiGLU's almost never are"),  # a SwiGLU's, the kind's, not arcee's
    ("jais2", "jais2.notes.md", "which a SwiGLU's almost never are"),
    ("gpt_oss", "gpt_oss.notes.md", "(the sigmoid approximation of GELU's gain)"),
    ("gemma2", "gemma2.notes.md", "PyTorch's sdpa has no softcap"),  # a backend
    ("granitemoeshared", "granitemoeshared.notes.md", "The block, not the mixture, calls the shared expert"),
    ("hyperclovax", "hyperclovax.notes.md", "(Peri-Layer Normalization:"),  # a name, its norms RMS
    ("iquestcoder", "iquestcoder.notes.md", "What the remote code adds over Llama"),  # another family
    ("qwen3_5_moe_text", "qwen3_5_moe_text.notes.md", "The attention has no softcap and"),  # the vision's windows
    ("deepseek_vl", "deepseek_vl.vision.md", "a GELU and `linear2` to one image token"),  # the vision projector
    ("llava", "llava.vision.md", "The projector (linear_1, GELU, linear_2,"),
    ("qwen2_vl", "qwen2_vl.vision.md", "of a linear, a GELU and a linear"),
    ("qwen3_vl", "qwen3_vl.vision.md", "`linear_fc1`, GELU and `linear_fc2`"),
    ("vipllava", "vipllava.vision.md", "`linear_fc1`, GELU and `down_proj`"),
    ("gemma3", "gemma3.vision.md", "each RMS-normed"),  # the image tokens' norm, not the SigLIP blocks' LayerNorm
    ("idefics2", "idefics2.vision.md", "perceiver layers and a final RMSNorm"),  # the connector
    ("qwen3_5_text", "qwen3_5_text.notes.md", None),  # its front matter's code said "mixture": no prose
    ("qwen3_5_moe_text", "qwen3_5_moe_text.vision.md", None),
]


@pytest.fixture(scope="module")
def facts(native_facts):
    return lambda name: json.loads((native_facts / f"{name}.json").read_text())


@pytest.mark.parametrize("name, field, sentence", TRUE_SENTENCES, ids=[f"{n}-{(s or 'front')[:20]}" for n, _, s in
                                                                       TRUE_SENTENCES])
def test_the_true_sentences_the_unscoped_check_refused_are_accepted(facts, name, field, sentence):
    from generator.facts.tags import check_tags, notes_prose
    from generator.recipe.family import get_family

    family = get_family(name)
    prose = dict(notes_prose(family))[field]
    if sentence is not None:
        assert sentence in " ".join(prose.split()), f"{field} no longer says {sentence!r}"
    check_tags(family, facts(name))  # every sentence of its notes, scoped


def _with_notes(family, tmp_path, sentence: str, vision: bool = False):
    mutated = with_yaml(family, tmp_path, tags=[])
    name = mutated.get("vision_notes", f"{family.family}.vision.md") if vision else mutated.get(
        "notes", f"{family.family}.notes.md")
    path = mutated.path.parent / name
    path.write_text(path.read_text() + f"\n\n{sentence}\n")
    return mutated


@pytest.mark.parametrize("wordings, holds_on, fails_on", PARAPHRASES,
                         ids=[f"{w[0][:24]}-{a}-{b}" for w, a, b in PARAPHRASES])
def test_a_claim_in_the_notes_is_checked_by_meaning_in_both_directions(tmp_path, facts, wordings, holds_on, fails_on):
    """The tagline's paraphrases, written in the notes: accepted where true, refused where false."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.tags import check_tags
    from generator.recipe.family import get_family

    for sentence in wordings:
        check_tags(_with_notes(get_family(holds_on), tmp_path, sentence), facts(holds_on))
        with pytest.raises(ClaimError, match=r"\.notes\.md phrase .*: says "):
            check_tags(_with_notes(get_family(fails_on), tmp_path, sentence), facts(fails_on))


@pytest.mark.parametrize("name, false, scoped", [
    # the false claim about the family's own blocks is refused; the same words said of another family, of a backend,
    # of the kind itself or of the vision connector are accepted
    ("llama", "Its logits are softcapped.", "Gemma 2's logits are softcapped, Llama's are not."),
    ("llama", "The attention logits are softcapped.", "Under sdpa, PyTorch's kernel takes no softcap."),
    ("gpt_neox", "The SwiGLU's gate is a SiLU.", "About half its neurons are zero, which a SwiGLU's almost never are."),
    ("llama", "The block, not the mixture, calls the MLP.", "The block calls the MLP, with no mixture."),
    ("llava", "Each vision block norms its input with an RMSNorm.", "The projector's RMSNorm norms each image token."),
])
def test_a_sentence_is_held_to_what_it_describes(tmp_path, facts, name, false, scoped):
    from generator.facts.claim_error import ClaimError
    from generator.facts.tags import check_tags
    from generator.recipe.family import get_family

    family = get_family(name)
    vision = "vision" in false
    check_tags(_with_notes(family, tmp_path, scoped, vision), facts(name))
    with pytest.raises(ClaimError, match=r"\.md phrase .*: says "):
        check_tags(_with_notes(family, tmp_path, false, vision), facts(name))


def test_a_vision_block_sentence_is_held_to_the_measured_vision_norm(tmp_path, facts):
    """Qwen2.5-VL's vision blocks are RMS-normed, LLaVA's (CLIP's) LayerNormed: each sentence holds on one only."""
    from generator.facts.claim_error import ClaimError
    from generator.facts.tags import check_tags
    from generator.recipe.family import get_family

    said = "Each vision block norms its input with an RMSNorm."
    check_tags(_with_notes(get_family("qwen2_5_vl"), tmp_path, said, vision=True), facts("qwen2_5_vl"))
    with pytest.raises(ClaimError, match="vision.md phrase 'RMSNorm'"):
        check_tags(_with_notes(get_family("llava"), tmp_path, said, vision=True), facts("llava"))
