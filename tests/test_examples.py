"""The notes of the qwen3_5_moe_text page (generator/notes/examples.py): built, checked, and broken on purpose.

The whole family's notes are built once against the tiny checkpoint; the failure cases run on
copies of the family's files in a temporary directory, each with one claim broken, and must fail
with a NoteError naming the note, the line and the claim.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from generator.notes.examples import NoteError, build_notes, evaluate, instrument, parse_notes, slugify
from generator.recipe.family import get_family

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "families"
FAMILY = "qwen3_5_moe_text"
YAML = FAMILIES / f"{FAMILY}.yaml"
FACTS = ROOT / "tests" / "fixtures" / "facts" / f"{FAMILY}.json"
NOTES = f"{FAMILY}.notes.md"
VISION = f"{FAMILY}.vision.md"
SHARED = "shared/qwen_vit.md"


@pytest.fixture(scope="module")
def vl_model(checkpoint):
    import nncanon

    return nncanon.load(checkpoint, task="image-text-to-text")


@pytest.fixture(scope="module")
def built(vl_model, checkpoint):
    return build_notes(get_family(YAML), checkpoint, model=vl_model)


class _BlockDumper(yaml.SafeDumper):
    """Dumps multi-line strings (the SAE markdown) as block scalars, line for line."""


_BlockDumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    ),
)


def copy_family(
    tmp_path: Path,
    keep: tuple[str, ...] = ("notes", "vision_notes", "shared_vision_notes", "saes"),
    **replace: tuple[str, str],
) -> Path:
    """The family's YAML and notes files under tmp_path, the sections not in ``keep`` dropped.

    ``replace``: file key ("notes", "vision", "shared", "yaml") -> (old, new), each old text present once.
    """
    files = {"notes": NOTES, "vision": VISION, "shared": SHARED}
    data = yaml.safe_load(YAML.read_text(encoding="utf-8"))
    for key in ("notes", "vision_notes", "shared_vision_notes", "saes"):
        if key not in keep:
            data.pop(key, None)
    text = yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=10_000)
    for key, name in files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        content = (FAMILIES / name).read_text(encoding="utf-8")
        if key in replace:
            old, new = replace[key]
            assert content.count(old) == 1, f"{old!r} is not in {name} exactly once"
            content = content.replace(old, new)
        target.write_text(content, encoding="utf-8")
    if "yaml" in replace:
        old, new = replace["yaml"]
        assert text.count(old) == 1, f"{old!r} is not in the YAML exactly once"
        text = text.replace(old, new)
    path = tmp_path / f"{FAMILY}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def line_of(name: str, text: str) -> int:
    """The 1-based line of ``text`` in the family's file ``name``."""
    lines = (FAMILIES / name).read_text(encoding="utf-8").splitlines()
    found = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, f"{text!r} is on lines {found} of {name}"
    return found[0]


# -- the real notes ---------------------------------------------------------------------------


def test_real_notes_build_in_the_facts_shapes(built):
    fixture = json.loads(FACTS.read_text(encoding="utf-8"))
    assert [(n["title"], n["slug"]) for n in built["notes"]] == [
        (n["title"], n["slug"]) for n in fixture["notes"]
    ]
    for note in built["notes"]:
        assert set(note) == {"title", "slug", "markdown"} and note["markdown"].strip()
    vision, expected = built["vision_notes"], fixture["vision_notes"]
    assert (vision["shared"]["title"], vision["shared"]["line"]) == (
        expected["shared"]["title"],
        expected["shared"]["line"],
    )
    assert [(n["title"], n["slug"]) for n in vision["shared"]["notes"]] == [
        (n["title"], n["slug"]) for n in expected["shared"]["notes"]
    ]
    assert vision["family"]["title"] == expected["family"]["title"]
    assert [(n["title"], n["slug"]) for n in vision["family"]["notes"]] == [
        (n["title"], n["slug"]) for n in expected["family"]["notes"]
    ]
    assert (
        set(vision["shared"]["variants"]) == {"markdown"}
        and "Qwen2.5-VL" in vision["shared"]["variants"]["markdown"]
    )
    saes = built["saes"]
    assert set(saes) == set(fixture["saes"])
    assert saes["releases"] == fixture["saes"]["releases"]
    assert "exactly k nonzero features per token" in saes["verified"]


def strings(value):
    """Every string in a JSON-like value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_every_expression_is_substituted(built):
    texts = list(strings(built))
    assert len(texts) >= 50
    assert not [t for t in texts if "{{" in t or "}}" in t]
    block = built["notes"][0]["markdown"]
    # checked literals show the number as typed; full-size numbers computed from the configs
    assert "30 DeltaNet blocks" in block and "45 and 15 on 397B-A17B" in block
    loading = next(n["markdown"] for n in built["notes"] if n["title"] == "Loading")
    assert "2 MiB\nper token per block on 35B-A3B, 4 MiB" in loading
    assert "`attention_scores` and `attention_probabilities`" in loading
    prompt = next(n["markdown"] for n in built["notes"] if n["slug"] == "the-prompt-and-the-chat-template")
    assert "is\n248044, `<|im_start|>` 248045" in prompt
    own = built["vision_notes"]["family"]["notes"][0]["markdown"]
    assert "4608 to 2048 on\n35B-A3B, to 3072 on 122B-A10B" in own


def test_code_is_shown_as_written(built):
    block = built["notes"][0]["markdown"]
    assert "```python\nh   = x + mixer(input_layernorm(x))" in block  # the display flag is dropped
    assert "# 3, 7, ..., 39 on 35B-A3B" in block  # expressions in code, substituted
    assert "full[-1] == len(types) - 1" in block and block.count("# True") == 3
    assert "__nncanon_true__" not in json.dumps(built)


def test_the_build_is_deterministic(built, vl_model, checkpoint):
    assert build_notes(get_family(YAML), checkpoint, model=vl_model) == built


def test_deltanet_queries_reach_the_kernel_at_the_key_head_count(vl_model):
    from generator.notes.examples import chat_prompt

    config = vl_model.config.get_text_config()
    assert config.linear_num_key_heads != config.linear_num_value_heads
    delta = vl_model.layers[1].linear_attn
    with vl_model.trace(chat_prompt(vl_model.tokenizer)):
        q = delta.attention_queries.save()
        k = delta.attention_keys.save()
        v = delta.attention_values.save()
    assert q.shape[2] == k.shape[2] == config.linear_num_key_heads
    assert v.shape[2] == config.linear_num_value_heads
    assert q.shape[3] == config.linear_key_head_dim


# -- broken claims --------------------------------------------------------------------------


def test_a_failing_assert_names_the_note_and_line(tmp_path, vl_model, checkpoint):
    anchor = "torch.testing.assert_close(weights, top.values / top.values.sum(-1, keepdim=True))"
    yaml_path = copy_family(tmp_path, keep=("notes",), notes=(anchor, anchor + "\nassert weights.sum() < 0"))
    with pytest.raises(NoteError) as caught:
        build_notes(get_family(yaml_path), checkpoint, model=vl_model)
    error = caught.value
    assert error.note == "The mixture: a softmax router, renormalized, and a gated shared expert"
    assert error.line == line_of(NOTES, anchor) + 1
    assert error.family == FAMILY and error.file.endswith(NOTES)
    assert "assert weights.sum() < 0" in str(error) and f"{NOTES}:{error.line}" in str(error)


def test_a_failing_assert_close_names_its_line(tmp_path, vl_model, checkpoint):
    anchor = "torch.testing.assert_close(slots.sum(2), routed)"
    yaml_path = copy_family(
        tmp_path, keep=("notes",), notes=(anchor, "torch.testing.assert_close(slots.sum(2), 2 * routed)")
    )
    with pytest.raises(NoteError, match="an assert fails: AssertionError") as caught:
        build_notes(get_family(yaml_path), checkpoint, model=vl_model)
    assert caught.value.line == line_of(NOTES, anchor)


def test_a_false_true_line_fails(tmp_path, vl_model, checkpoint):
    anchor = "torch.equal(routed + shared, mlp)               # True"
    yaml_path = copy_family(tmp_path, keep=("notes",), notes=(anchor, "torch.equal(routed, mlp)  # True"))
    with pytest.raises(NoteError, match="'# True' line does not hold") as caught:
        build_notes(get_family(yaml_path), checkpoint, model=vl_model)
    assert caught.value.note == "The contributions are the sublayers' outputs"
    assert caught.value.line == line_of(NOTES, anchor)
    assert caught.value.claim == "torch.equal(routed, mlp)  # True"


def test_a_false_true_line_inside_a_trace_fails(tmp_path, vl_model, checkpoint):
    anchor = "    out = model.layers[1].layer_output.save()"
    yaml_path = copy_family(tmp_path, keep=("notes",), notes=(anchor, anchor + "\n    1 == 2  # True"))
    with pytest.raises(NoteError, match="'# True' line does not hold"):
        build_notes(get_family(yaml_path), checkpoint, model=vl_model)


@pytest.mark.parametrize(
    "where, old, new, note, claim",
    [
        (
            "notes",
            '{{ 30 == count("linear_attention", "35B-A3B") }}',
            '{{ 31 == count("linear_attention", "35B-A3B") }}',
            "The block, in order",
            "claims 31",
        ),
        (
            "notes",
            '{{ 248045 == token_id("<|im_start|>", "35B-A3B") }}',
            '{{ 248047 == token_id("<|im_start|>", "35B-A3B") }}',
            "The prompt and the chat template",
            "claims 248047",
        ),
        (
            "notes",
            '{{ 2 == state_mib("35B-A3B") }}',
            '{{ 3 == state_mib("35B-A3B") }}',
            "Loading",
            "claims 3",
        ),
        (
            "notes",
            '{{ 8192 == q_width("35B-A3B") }}',
            '{{ 4096 == q_width("35B-A3B") }}',
            "The attention block gates its heads' output",
            "claims 4096",
        ),
        (
            "vision",
            '{{ 4608 == merged_in("35B-A3B") }}',
            '{{ 4600 == merged_in("35B-A3B") }}',
            "The merger folds four patches into one image token",
            "claims 4600",
        ),
        (
            "yaml",
            '{{ 40 == text("35B-A3B-Base").num_hidden_layers }}',
            '{{ 48 == text("35B-A3B-Base").num_hidden_layers }}',
            "Sparse autoencoders",
            "claims 48",
        ),
    ],
)
def test_a_mutated_checked_literal_fails_naming_the_claim(
    tmp_path, vl_model, checkpoint, where, old, new, note, claim
):
    keep = {"notes": ("notes",), "vision": ("vision_notes",), "yaml": ("saes",)}[where]
    yaml_path = copy_family(tmp_path, keep=keep, **{where: (old, new)})
    with pytest.raises(NoteError) as caught:
        build_notes(get_family(yaml_path), checkpoint, model=vl_model)
    error = caught.value
    assert error.note == note and error.claim == new
    assert claim in error.message and new in str(error)
    if where != "yaml":
        assert error.line == line_of({"notes": NOTES, "vision": VISION}[where], old)


def test_a_false_silent_check_fails(tmp_path, vl_model, checkpoint):
    old = '{{ assert all(text(c).layer_types[-1] == "full_attention" for c in ids()) }}'
    new = '{{ assert all(text(c).layer_types[0] == "full_attention" for c in ids()) }}'
    yaml_path = copy_family(tmp_path, keep=("notes",), notes=(old, new))
    with pytest.raises(
        NoteError, match=r'layer_types\[0\] == "full_attention" for c in ids\(\)\) is false'
    ) as caught:
        build_notes(get_family(yaml_path), checkpoint, model=vl_model)
    assert caught.value.note == "The block, in order" and caught.value.line == line_of(NOTES, old)


def test_a_wrong_sae_release_fails_with_the_field(tmp_path, vl_model, checkpoint):
    from generator.recipe.fields import FamilyYamlError

    yaml_path = copy_family(tmp_path, keep=("saes",), yaml=("features: 32768", "features: 32000"))
    with pytest.raises(FamilyYamlError, match=r"saes\.releases\[0\].*names 32768 features"):
        build_notes(get_family(yaml_path), checkpoint, model=vl_model)


# -- the syntax, without a model ----------------------------------------------------------------


def test_expression_forms():
    names = {"n": 30, "xs": [11, 11, 10], "ok": True}
    assert evaluate(" 30 == n ", names) == "30"
    assert evaluate("n == 30", names) == "30"
    assert evaluate("[11, 11, 10] == xs", names) == "[11, 11, 10]"
    assert evaluate("n * 2", names) == "60" and evaluate("xs", names) == "[11, 11, 10]"
    assert evaluate("assert ok", names) == ""
    from generator.notes.examples import ClaimFailed

    with pytest.raises(ClaimFailed, match="claims 31, but n is 30"):
        evaluate("31 == n", names)
    with pytest.raises(ClaimFailed, match="a truth value"):
        evaluate("n > 3", names)
    with pytest.raises(ClaimFailed, match="is false"):
        evaluate("assert n < 3", names)
    with pytest.raises(NameError):
        evaluate("open('x')", names)  # no builtins beyond the pure ones


def test_true_lines_are_wrapped_in_place():
    source = "a = 1\nb = [a,\n     2]  # True\nx = 3  # True\n"
    with pytest.raises(ValueError):
        instrument(source)  # an assignment cannot be a claim
    out, originals = instrument("a = 1\n(a ==\n 1)  # True: one\n")
    assert out.splitlines()[1].startswith("__nncanon_true__((a ==") and out.splitlines()[2].startswith(
        " 1), 3)"
    )
    assert list(originals) == [3]


def test_notes_file_structure(tmp_path):
    path = tmp_path / "x.md"
    path.write_text(
        "---\ntitle: T\n---\n<!-- a comment -->\n\n## First {#one}\ntext\n## Second's note\n```python\n"
        "## not a heading\n```\n",
        encoding="utf-8",
    )
    front, notes = parse_notes(path)
    assert front == {"title": "T"} and [(n.title, n.slug, n.line) for n in notes] == [
        ("First", "one", 6),
        ("Second's note", "seconds-note", 8),
    ]
    assert (
        slugify("Read the vision values in the forward's order")
        == "read-the-vision-values-in-the-forwards-order"
    )
    path.write_text("stray text\n## A\n", encoding="utf-8")
    with pytest.raises(NoteError, match=r"x\.md:1\): text before the first"):
        parse_notes(path)
    path.write_text("## A\n```python\nx = 1\n", encoding="utf-8")
    with pytest.raises(NoteError, match="never closed"):
        parse_notes(path)


def test_the_real_files_parse_into_the_expected_notes():
    _, notes = parse_notes(FAMILIES / NOTES)
    assert len(notes) == 9 and all(re.match(r"^[a-z0-9-]+$", n.slug) for n in notes)
    front, shared = parse_notes(FAMILIES / SHARED)
    assert front["variants"] == "The variants" and shared[-1].title == "The variants"
