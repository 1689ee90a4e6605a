"""Family YAML validation (generator/recipe/family.py): every malformed file names its file and field."""

import copy

import pytest
import yaml

from generator.recipe.family import Family, all_families, families_dir, load_family
from generator.recipe.fields import FamilyYamlError

SHA = "3f" * 32


def valid() -> dict:
    """A small, valid family file's content (written as x.yaml)."""
    return {
        "family": "x",
        "module": "nncanon.families.qwen3",
        "lines": ["X-1"],
        "tagline": "A test family.",
        "tags": ["Test"],
        "tiny": {
            "class": "Qwen3_5MoeForConditionalGeneration",
            "seed": 0,
            "config": {"text_config": {"hidden_size": 40}},
            "tokenizer": {
                "bpe_vocab_size": 300,
                "special_tokens": {"<|endoftext|>": 300, "<|im_start|>": 301},
            },
            "processor": {"patch_size": 16},
            "sha256": SHA,
        },
        "checkpoints": [
            {"id": "Org/X-Base", "printout": True, "config": {"text_config": {"hidden_size": 2048}}},
            {"id": "Org/X", "same_as": "Org/X-Base"},
        ],
        "notes": [{"anything": "goes"}],
        "saes": {"raw": True},
    }


def write(tmp_path, data, name="x.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_every_line_name_is_whole():
    """A YAML flow list splits an unquoted name at its commas ("[Gemma 3 (4B, 12B)]" is two lines, "Gemma 3 (4B"
    and "12B)"): every line of every family closes what it opens."""
    for family in all_families():
        for line in family.lines:
            assert line.count("(") == line.count(")") and line.count("[") == line.count("]"), (family.family, line)


def test_valid_file_loads(tmp_path):
    fam = load_family(write(tmp_path, valid()))
    assert isinstance(fam, Family)
    assert (fam.family, fam.module, fam.lines, fam.tags) == ("x", "nncanon.families.qwen3", ("X-1",), ("Test",))
    assert fam.tiny["seed"] == 0 and fam.tiny_recipe.keys() == fam.tiny.keys() - {"sha256"}
    assert fam.printout_checkpoint == "Org/X-Base"
    assert fam.checkpoint_config("Org/X") == {"text_config": {"hidden_size": 2048}}
    assert fam["notes"] == [{"anything": "goes"}] and fam.saes == {"raw": True}
    with pytest.raises(AttributeError):
        fam.family = "y"  # frozen


def test_repository_families_load():
    families = all_families()
    names = [f.family for f in families]
    assert "qwen3_5_moe_text" in names
    assert sorted(names) == sorted(p.stem for p in families_dir().glob("*.yaml"))
    fam = next(f for f in families if f.family == "qwen3_5_moe_text")
    assert fam.printout_checkpoint == "Qwen/Qwen3.5-35B-A3B-Base"
    assert {
        "Qwen/Qwen3.5-35B-A3B",
        "Qwen/Qwen3.5-122B-A10B",
        "Qwen/Qwen3.5-397B-A17B",
        "Qwen/Qwen3.6-35B-A3B",
    } <= set(fam.checkpoint_ids)


def _set(data, dotted, value):
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = keys[-1]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


class _Delete:
    """The field removed (a sentinel whose repr is stable, so test ids agree across pytest-xdist workers)."""

    def __repr__(self) -> str:
        return "<deleted>"


_DELETE = _Delete()

# (what to change, the value (or _DELETE), the field the error must name, a part of its message)
CASES = [
    ("tagline", _DELETE, "tagline", "missing"),
    ("tiny", _DELETE, "tiny", "missing"),
    ("checkpoints", _DELETE, "checkpoints", "missing"),
    ("tiny.seed", _DELETE, "tiny.seed", "missing"),
    ("tiny.tokenizer.special_tokens", _DELETE, "tiny.tokenizer.special_tokens", "missing"),
    ("tiny.seed", "abc", "tiny.seed", "expected an integer, got 'abc'"),
    ("tiny.seed", True, "tiny.seed", "expected an integer, got True"),
    ("family", 3, "family", "expected a string, got 3"),
    ("lines", "X-1", "lines", "expected a list"),
    ("tags", ["ok", 5], "tags[1]", "expected a string, got 5"),
    ("tiny.config", [1, 2], "tiny.config", "expected a mapping"),
    ("tiny.processor", None, "tiny.processor", "expected a mapping, got None"),
    ("tiny.derived_config_keys", "num_key_value_heads", "tiny.derived_config_keys", "expected a list"),
    ("tiny.derived_config_keys", ["num_key_value_heads", 2], "tiny.derived_config_keys[1]", "expected a string, got 2"),
    (
        "tiny.tokenizer.bpe_vocab_size",
        "300",
        "tiny.tokenizer.bpe_vocab_size",
        "expected an integer, got '300'",
    ),
    ("tiny.tokenizer.bpe_vocab_size", 100, "tiny.tokenizer.bpe_vocab_size", "256 byte symbols"),
    (
        "tiny.tokenizer.special_tokens",
        {"<|a|>": "x"},
        "tiny.tokenizer.special_tokens.<|a|>",
        "expected an integer",
    ),
    (
        "tiny.tokenizer.special_tokens",
        {"<|a|>": 300, "<|b|>": 300},
        "tiny.tokenizer.special_tokens.<|b|>",
        "already",
    ),
    ("tiny.sha256", "not-a-hash", "tiny.sha256", "64 lowercase hex"),
    ("tiny.sha256", 12, "tiny.sha256", "expected a string, got 12"),
    ("checkpoints", {"id": "a"}, "checkpoints", "expected a list"),
    ("checkpoints", [], "checkpoints", "at least one"),
    ("checkpoints.0.id", 7, "checkpoints[0].id", "expected a string, got 7"),
    ("checkpoints.0.config", [1], "checkpoints[0].config", "expected a mapping"),
    ("checkpoints.0.printout", "yes", "checkpoints[0].printout", "expected a boolean"),
    ("checkpoints.1.same_as", "Org/Missing", "checkpoints[1].same_as", "not a checkpoint id"),
    ("checkpoints.1.id", "Org/X-Base", "checkpoints[1].id", "listed twice"),
    (
        "checkpoints.0.printout",
        False,
        "checkpoints",
        "exactly one checkpoint must have 'printout: true', found 0",
    ),
    ("checkpoints.1.printout", True, "checkpoints", "found 2"),
    ("checkpoints.1.config", {"a": 1}, "checkpoints[1].config", "exactly one of 'config'"),
    ("colour", "red", "colour", "unknown field"),
    ("tiny.extra", 1, "tiny.extra", "unknown field"),
    ("tiny.tokenizer.extra", 1, "tiny.tokenizer.extra", "unknown field"),
    ("checkpoints.0.revision", "main", "checkpoints[0].revision", "unknown field"),
    ("family", "y", "family", "they must match"),
    ("group", "", "group", "name the line"),
    ("checkpoints.0.inferred", ["vocab_size"], "checkpoints[0].inferred", "expected a mapping"),
    ("checkpoints.0.inferred", {"no_such_field": "why"}, "checkpoints[0].inferred.no_such_field",
     "not a field of this checkpoint's entry"),
    ("checkpoints.0.inferred", {"config": ""}, "checkpoints[0].inferred.config", "say why"),
    ("checkpoints.1.inferred", {"vocab_size": "why"}, "checkpoints[1].inferred.vocab_size", "(one of: same_as)"),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "message"), CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CASES]
)
def test_malformed_file_names_file_and_field(tmp_path, path, value, field, message):
    data = copy.deepcopy(valid())
    _set(data, path, value)
    file = write(tmp_path, data)
    with pytest.raises(FamilyYamlError) as info:
        load_family(file)
    err = info.value
    assert err.field == field
    text = str(err)
    assert text.startswith(f"{file}: field '{field}': "), text
    assert message in text, text


def test_exact_message_for_a_wrong_type(tmp_path):
    data = valid()
    data["tiny"]["seed"] = "abc"
    file = write(tmp_path, data)
    with pytest.raises(FamilyYamlError) as info:
        load_family(file)
    assert str(info.value) == f"{file}: field 'tiny.seed': expected an integer, got 'abc'"


def test_unknown_keys_are_all_named(tmp_path):
    data = valid()
    data["colour"] = "red"
    data["size"] = 3
    with pytest.raises(FamilyYamlError, match=r"unknown fields 'colour', 'size' \(allowed: family, module"):
        load_family(write(tmp_path, data))


def test_circular_same_as(tmp_path):
    data = valid()
    data["checkpoints"].append({"id": "Org/Y", "same_as": "Org/Z"})
    data["checkpoints"].append({"id": "Org/Z", "same_as": "Org/Y"})
    with pytest.raises(
        FamilyYamlError, match=r"field 'checkpoints\[2\]\.same_as': circular same_as: Org/Y -> Org/Z -> Org/Y"
    ):
        load_family(write(tmp_path, data))


def test_invalid_yaml_and_non_mapping_name_the_file(tmp_path):
    bad = tmp_path / "x.yaml"
    bad.write_text("family: x\ntiny: [unclosed\n", encoding="utf-8")
    with pytest.raises(FamilyYamlError, match=r"x\.yaml: line 3: invalid YAML: expected ',' or '\]'"):
        load_family(bad)
    bad.write_text("- just\n- a list\n", encoding="utf-8")
    with pytest.raises(FamilyYamlError, match=r"x\.yaml: expected a mapping at the top level, got list"):
        load_family(bad)
    with pytest.raises(FamilyYamlError, match=r"missing\.yaml: cannot read"):
        load_family(tmp_path / "missing.yaml")


def test_repository_paths_are_shown_relative():
    fam = next(f for f in all_families() if f.family == "qwen3_5_moe_text")
    err = FamilyYamlError(fam.path, "tiny.seed", "expected an integer, got 'abc'")
    assert str(err) == "families/qwen3_5_moe_text.yaml: field 'tiny.seed': expected an integer, got 'abc'"


def test_yaml_anchors_are_refused(tmp_path):
    """An alias would share one object between two places (and a few nested ones expand to billions
    of values): the loader refuses them, naming the line (tests/test_bad_input.py has more)."""
    data = valid()
    data["checkpoints"][1] = {"id": "Org/X", "config": {"text_config": {"hidden_size": 2048}}}
    text = yaml.safe_dump(data, sort_keys=False).replace(
        "  config:\n    text_config:\n      hidden_size: 2048\n- id: Org/X\n  config:\n    text_config:\n      hidden_size: 2048\n",
        "  config: &c\n    text_config:\n      hidden_size: 2048\n- id: Org/X\n  config: *c\n",
    )
    assert "*c" in text
    (tmp_path / "x.yaml").write_text(text, encoding="utf-8")
    line = text.splitlines().index("  config: &c") + 1
    with pytest.raises(FamilyYamlError) as info:
        load_family(tmp_path / "x.yaml")
    assert str(info.value) == (
        f"{tmp_path / 'x.yaml'}: line {line}: YAML anchors and aliases are not allowed (write the value out)"
    )


def test_releases_narrows_the_transformers_releases_a_family_is_verified_on(tmp_path):
    (tmp_path / "every").mkdir()
    (tmp_path / "bad").mkdir()
    data = valid()
    data["releases"] = ">=5.23,<5.24"
    fam = load_family(write(tmp_path, data))
    assert fam.verified_under("5.23.0") and not fam.verified_under("5.24.0")
    assert load_family(write(tmp_path / "every", valid())).verified_under("5.24.0")
    data["releases"] = "five twenty-three"
    with pytest.raises(FamilyYamlError, match=r"field 'releases': 'five twenty-three' is not a version specifier"):
        load_family(write(tmp_path / "bad", data))


def test_libyaml_and_the_pure_parser_read_every_family_alike_and_refuse_alike():
    """The loader parses with libyaml where PyYAML has it (five times faster) and with the pure-Python parser
    otherwise: both give every repository YAML the same data, to the type (1 is not 1.0, True is not 1), and
    refuse an anchor, an alias, a key given twice and a merge key with the same line and message."""
    import json

    from generator.recipe import yaml_strict

    assert yaml_strict._StrictCLoader is not None, "PyYAML without libyaml: the faster path is not tested here"
    for path in sorted(families_dir().glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        fast, pure = yaml_strict._parsed(text, "c"), yaml_strict._parsed(text, "python")
        assert json.dumps(fast, sort_keys=True, default=repr) == json.dumps(pure, sort_keys=True, default=repr), path
    refused = ["a: 1\nb: &x 2\nc: *x\n", "a: 1\nb:\n  c: 1\n  c: 2\n", "a: &x {b: 1}\nc:\n  <<: *x\n",
               "a: 1\n<<: {b: 2}\n", "a: 1\n- b\n", "[a]: 1\n", "a: 1\n---\nb: 2\n"]
    for text in refused:
        messages = []
        for parser in ("c", "python"):
            with pytest.raises(yaml_strict.StrictYamlError) as info:
                yaml_strict._parsed(text, parser)
            messages.append(str(info.value))
        assert messages[0] == messages[1], (text, messages)
