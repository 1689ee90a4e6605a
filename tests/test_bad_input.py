"""Issue 10: every bad input of a family (its YAML, its notes) fails with ONE line naming the file,
the field or line, and the fix: never a traceback, never a hang, never a build that exits 0.

The YAML cases mutate a copy of a real family file (qwen3, or qwen3_vl for the nested configs);
the notes cases run a small synthetic notes file without a model.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from limits import HANG

from generator.recipe.family import load_family
from generator.recipe.fields import FamilyYamlError

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "families"


def copy_family(tmp_path: Path, name: str = "qwen3") -> Path:
    """The family's YAML and the notes files it names, under tmp_path."""
    source = FAMILIES / f"{name}.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    for key in ("notes", "vision_notes", "shared_vision_notes"):
        if isinstance(data.get(key), str):
            target = tmp_path / data[key]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(FAMILIES / data[key], target)
    path = tmp_path / source.name
    shutil.copy(source, path)
    return path


def mutate(tmp_path: Path, edit, name: str = "qwen3") -> Path:
    """A copy of the family with ``edit`` applied to its parsed data."""
    path = copy_family(tmp_path, name)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def error_of(path: Path) -> FamilyYamlError:
    with pytest.raises(FamilyYamlError) as info:
        load_family(path)
    text = str(info.value)
    assert "\n" not in text, text
    assert text.startswith(str(path)), text
    return info.value


def test_the_copies_load(tmp_path):
    assert load_family(copy_family(tmp_path / "a")).family == "qwen3"
    assert load_family(copy_family(tmp_path / "b", "qwen3_vl")).family == "qwen3_vl"


# -- the YAML text ------------------------------------------------------------------------------

BILLION_LAUGHS = "".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n',
        *(f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    ]
)


def test_billion_laughs_is_refused_at_once(tmp_path):
    """~500 bytes that expand to 9**9 strings: the build hung copying them; now refused at the first anchor."""
    path = copy_family(tmp_path)
    path.write_text(path.read_text(encoding="utf-8") + "laughs:\n" + textwrap.indent(BILLION_LAUGHS, "  "))
    line = path.read_text(encoding="utf-8").splitlines().index("laughs:") + 2
    script = (
        "import sys\nfrom generator.recipe.family import FamilyYamlError, load_family\n"
        "try:\n    load_family(sys.argv[1])\nexcept FamilyYamlError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=HANG
    )
    assert done.stdout == (
        f"{path}: line {line}: YAML anchors and aliases are not allowed (write the value out)\n"
    ), done.stderr[-2000:]


def test_a_repeated_key_names_both_lines(tmp_path):
    path = copy_family(tmp_path)
    text = path.read_text(encoding="utf-8")
    text = text.replace("    hidden_size: 40\n", "    hidden_size: 40\n    hidden_size: 4000\n", 1)
    path.write_text(text, encoding="utf-8")
    first = text.splitlines().index("    hidden_size: 40") + 1
    assert str(error_of(path)) == (
        f"{path}: line {first + 1}: key 'hidden_size' is given twice in one mapping "
        f"(first on line {first}); keep one"
    )


def test_a_merge_key_is_refused(tmp_path):
    path = copy_family(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace("  seed: 0\n", "  <<: {seed: 0}\n", 1))
    assert "merge keys ('<<') are not allowed" in str(error_of(path))


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path):
    path = copy_family(tmp_path)
    raw = path.read_bytes().replace(b"Llama's pre-norm", b"Llama\xe9s pre-norm", 1)
    path.write_bytes(raw)
    offset = raw.index(b"\xe9")
    line = raw[:offset].count(b"\n") + 1
    assert str(error_of(path)) == (
        f"{path}: line {line}: byte {offset} (0xe9) is not UTF-8; save the file as UTF-8"
    )


def test_invalid_yaml_is_one_line_with_its_line(tmp_path):
    path = copy_family(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace("  seed: 0\n", "  seed: [0\n", 1))
    error = error_of(path)
    assert error.line is not None and "invalid YAML: " in str(error)


def test_a_yaml_date_is_refused_naming_the_field(tmp_path):
    path = copy_family(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace("  seed: 0\n", "  seed: 2024-01-01\n", 1))
    error = error_of(path)
    assert error.field == "tiny.seed" and "is a YAML date, not plain data; quote it" in str(error)


# -- fields: (edit, the field named, a part of the message) --------------------------------------


def _set(*keys, value):
    def edit(data):
        node = data
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value

    return edit


def _rename(*keys, new):
    def edit(data):
        node = data
        for key in keys[:-1]:
            node = node[key]
        node[new] = node.pop(keys[-1])

    return edit


def _drop(*keys):
    def edit(data):
        node = data
        for key in keys[:-1]:
            node = node[key]
        del node[keys[-1]]

    return edit


FULL = ("checkpoints", 0, "config")
CASES = {
    # page and claims: a typo used to drop the diagram silently, or crash the render
    "page typo": (_rename("page", "block_kinds", new="block_kind"), "page.block_kind", "unknown field 'block_kind'"),
    "claims typo": (_rename("claims", "identities", new="identites"), "claims.identites", "unknown field"),
    "block kind without label": (
        _drop("page", "block_kinds", "full_attention", "label"),
        "page.block_kinds.full_attention.label",
        "missing (required)",
    ),
    "block kind typo": (
        _rename("page", "block_kinds", "full_attention", "parts", new="part"),
        "page.block_kinds.full_attention.part",
        "unknown field",
    ),
    "part not a pair": (
        _set("page", "block_kinds", "full_attention", "parts", value=["input_layernorm"]),
        "page.block_kinds.full_attention.parts[0]",
        "expected a [module, value] pair of strings (then 'parallel' for a part that reads what the part before it "
        "reads), got 'input_layernorm'",
    ),
    "config fields not strings": (_set("page", "config_fields", value=[1]), "page.config_fields[0]", "expected a string"),
    "identity without expr": (_drop("claims", "identities", 0, "expr"), "claims.identities[0].expr", "missing"),
    "identity tolerance": (
        _set("claims", "identities", 0, "tolerance", value="small"),
        "claims.identities[0].tolerance",
        "expected an integer or a number",
    ),
    "identity expr": (
        _set("claims", "identities", 0, "expr", value="a + b"),
        "claims.identities[0].expr",
        "expected 'a + b + ... == c'",
    ),
    "value claim typo": (
        _rename("claims", "values", "model", "logits", "read_at", new="read"),
        "claims.values.model.logits.read",
        "unknown field",
    ),
    # sizes: a tiny checkpoint stays tiny, full-size configs stay realistic
    "bpe vocabulary of a billion": (
        _set("tiny", "tokenizer", "bpe_vocab_size", value=10**9),
        "tiny.tokenizer.bpe_vocab_size",
        "1000000000 exceeds 4096",
    ),
    "bpe vocabulary as a float": (
        _set("tiny", "tokenizer", "bpe_vocab_size", value=1e9),
        "tiny.tokenizer.bpe_vocab_size",
        "expected an integer, got 1000000000.0",
    ),
    "negative size": (_set("tiny", "config", "hidden_size", value=-40), "tiny.config.hidden_size", "positive"),
    "float size": (
        _set("tiny", "config", "num_hidden_layers", value=4.0),
        "tiny.config.num_hidden_layers",
        "expected a whole number (a size), got 4.0",
    ),
    "boolean size": (
        _set("tiny", "config", "num_attention_heads", value=True),
        "tiny.config.num_attention_heads",
        "got True",
    ),
    "huge tiny width": (
        _set("tiny", "config", "intermediate_size", value=100_000),
        "tiny.config.intermediate_size",
        "100000 exceeds the limit 1,024 (a tiny checkpoint must stay tiny)",
    ),
    "huge tiny vocabulary": (
        _set("tiny", "config", "vocab_size", value=10**9),
        "tiny.config.vocab_size",
        "exceeds the limit 65,536",
    ),
    "tiny over the parameter limit": (
        lambda d: d["tiny"]["config"].update(hidden_size=1024, intermediate_size=1024, num_hidden_layers=32),
        "tiny.config",
        "parameters, over the tiny limit 20,000,000",
    ),
    "full-size vocabulary": (
        _set(*FULL, "vocab_size", value=10**12),
        "checkpoints[0].config.vocab_size",
        "exceeds the limit 1,000,000",
    ),
    "full-size layers": (_set(*FULL, "num_hidden_layers", value=0), "checkpoints[0].config.num_hidden_layers", "positive"),
    "full-size width as text": (
        _set(*FULL, "hidden_size", value="4096"),
        "checkpoints[0].config.hidden_size",
        "expected a whole number (a size), got '4096'",
    ),
    # notes paths and the module
    "notes outside": (_set("notes", value="../qwen3.notes.md"), "notes", "must name a .md file beside the YAML"),
    "notes absolute": (_set("notes", value="/etc/passwd"), "notes", "must name a .md file beside the YAML"),
    "notes not a path": (_set("notes", value=3), "notes", "expected a path to a markdown file or a list of notes"),
    "module elsewhere": (_set("module", value="os"), "module", "'os' is not a family module"),
    "module missing": (_set("module", value="nncanon.families.qwen9"), "module", ", llama, "),
    "module shared helper": (_set("module", value="nncanon.parts.blocks.decoder"), "module", "not a family module"),
}


def test_a_missing_notes_file_is_named_when_the_notes_are_built(tmp_path):
    """The YAML loads (pin and checkpoint need only the recipe); building its notes names the path."""
    from generator.notes.examples import _notes_source

    family = load_family(mutate(tmp_path, _set("notes", value="qwen3.notess.md")))
    with pytest.raises(FamilyYamlError) as info:
        _notes_source(family, "notes", "qwen3.notes.md")
    assert str(info.value) == (
        f"{family.path}: field 'notes': no notes file 'qwen3.notess.md' "
        f"(looked for {tmp_path / 'qwen3.notess.md'}); write it or fix the path"
    )


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_field_names_itself(tmp_path, case):
    edit, field, message = CASES[case]
    error = error_of(mutate(tmp_path, edit))
    assert error.field == field, str(error)
    assert message in str(error), str(error)


VL_CASES = {
    "nested tiny size": (
        _set("tiny", "config", "text_config", "hidden_size", value=-1),
        "tiny.config.text_config.hidden_size",
        "must be a positive integer, got -1",
    ),
    "nested tiny depth": (
        _set("tiny", "config", "vision_config", "depth", value=10_000),
        "tiny.config.vision_config.depth",
        "exceeds the limit 32",
    ),
    "nested full size": (
        _set(*FULL, "text_config", "num_attention_heads", value=1.5),
        "checkpoints[0].config.text_config.num_attention_heads",
        "expected a whole number",
    ),
    "vision page typo": (_rename("page", "vision", "chain", new="chains"), "page.vision.chains", "unknown field"),
    "vision chain link": (
        _set("page", "vision", "chain", 0, value={"value": "pixel_values"}),
        "page.vision.chain[0].module",
        "missing",
    ),
    "shared notes beside the YAML": (
        _set("shared_vision_notes", value="qwen_vit.md"),
        "shared_vision_notes",
        "must name a .md file in shared/ beside the YAML",
    ),
}


@pytest.mark.parametrize("case", list(VL_CASES))
def test_a_bad_field_of_a_vision_family_names_itself(tmp_path, case):
    edit, field, message = VL_CASES[case]
    error = error_of(mutate(tmp_path, edit, "qwen3_vl"))
    assert error.field == field, str(error)
    assert message in str(error), str(error)


def test_every_repository_family_loads():
    from generator.recipe.family import all_families

    assert len(all_families()) == len(list(FAMILIES.glob("*.yaml")))


# -- notes: arbitrary code, run under a time limit ---------------------------------------------------


NOTES = '''\
## Loops forever
Some text.
```python
x = 1
while True:
    x += 1
```

## Exits
```python
import sys
sys.exit(0)
```

## Swallows exceptions
```python
while True:
    try:
        pass
    except Exception:
        pass
```

## Long expression
It is {{ len([n for n in range(10**9)]) }}.

## Interrupted
```python
raise KeyboardInterrupt
```

## Ctrl-C
```python
import os, signal
os.kill(os.getpid(), signal.SIGINT)
```

## Exits hard
```python
import os
os._exit(0)
```

## Fine
```python
y = 2
assert y == 2
```
'''


@pytest.fixture()
def runner(tmp_path):
    from generator.notes.examples import ExpressionContext, NoteRunner, parse_notes
    from generator.recipe.family import get_family

    family = get_family("qwen3")
    context = ExpressionContext(family)
    path = tmp_path / "x.notes.md"
    path.write_text(NOTES, encoding="utf-8")
    _, notes = parse_notes(path, family.family)
    runner = NoteRunner(family, context, {})
    runner.notes = {n.title: n for n in notes}
    runner.names = context.namespace()
    return runner


def run(runner, title):
    return runner.check(runner.notes[title], runner.names)


def note_error(runner, title):
    from generator.notes.examples import NoteError

    with pytest.raises(NoteError) as info:
        run(runner, title)
    assert "\n" not in str(info.value)
    return info.value


def lines_of(*texts: str) -> list[int]:
    """The 1-based lines of NOTES that are (stripped) one of ``texts``."""
    return [n for n, line in enumerate(NOTES.splitlines(), 1) if line.strip() in texts]


@pytest.mark.parametrize(
    "title, lines",
    [
        ("Loops forever", ("while True:", "x += 1")),
        ("Swallows exceptions", ("while True:", "try:", "pass", "except Exception:")),
        ("Long expression", ("It is {{ len([n for n in range(10**9)]) }}.",)),
    ],
)
def test_an_endless_note_fails_naming_it(runner, monkeypatch, title, lines):
    monkeypatch.setenv("NNCANON_NOTE_TIMEOUT", "1")
    before = signal.getsignal(signal.SIGALRM)
    error = note_error(runner, title)
    assert error.note == title and error.line in lines_of(*lines), str(error)
    assert error.claim in lines, str(error)
    assert "runs over its time limit of 1 s" in str(error) and "NNCANON_NOTE_TIMEOUT" in str(error)
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert run(runner, "Fine") == ["```python", "y = 2", "assert y == 2", "```"]  # the next note runs


def test_a_note_that_exits_fails_the_build(runner):
    error = note_error(runner, "Exits")
    assert error.note == "Exits" and error.line == lines_of("sys.exit(0)")[0] and error.claim == "sys.exit(0)"
    assert "SystemExit: 0, which would end the build" in str(error)


def test_the_users_ctrl_c_still_stops_the_build(runner):
    import signal

    # as in a terminal: a test worker may run with SIGINT ignored, where no Ctrl-C can reach a build at all
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(runner, "Ctrl-C")
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_note_raising_keyboard_interrupt_is_not_the_users_ctrl_c(runner):
    error = note_error(runner, "Interrupted")
    assert error.line == lines_of("raise KeyboardInterrupt")[0] and "must not raise it" in str(error)


def test_a_note_calling_os_exit_fails_the_build_instead_of_ending_it(runner):
    import os

    real = os._exit
    error = note_error(runner, "Exits hard")
    assert error.line == lines_of("os._exit(0)")[0] and "calls os._exit(0), which would end the build" in str(error)
    assert os._exit is real


def test_a_bad_timeout_setting_is_named(runner, monkeypatch):
    monkeypatch.setenv("NNCANON_NOTE_TIMEOUT", "soon")
    assert "NNCANON_NOTE_TIMEOUT='soon': expected seconds" in str(note_error(runner, "Fine"))


def test_a_multi_line_message_is_one_line():
    from generator.notes.examples import NoteError

    error = NoteError("x", "A note", "x.md", 3, "Tensor-likes are not close!\n\nMismatched elements: 1", "f(x)")
    assert str(error) == (
        "x: note 'A note' (x.md:3): Tensor-likes are not close! / Mismatched elements: 1 (in: f(x))"
    )


def test_a_call_that_never_returns_to_python_stops_the_build(tmp_path):
    """A long call in C (no bytecode boundary, so no signal handler) cannot be interrupted: the
    watchdog process prints one line naming the note and ends the build instead of letting it hang."""
    path = tmp_path / "x.notes.md"
    path.write_text("## Sums\nIt is {{ sum(range(10**15)) }}.\n", encoding="utf-8")
    script = textwrap.dedent(
        f"""
        from generator.notes.examples import ExpressionContext, NoteRunner, parse_notes
        from generator.recipe.family import get_family
        family = get_family("qwen3")
        context = ExpressionContext(family)
        _, notes = parse_notes({str(path)!r}, "qwen3")
        NoteRunner(family, context, {{}}).check(notes[0], context.namespace())
        print("returned")
        """
    )
    env = {**os.environ, "NNCANON_NOTE_TIMEOUT": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=HANG, env=env
    )
    assert done.returncode == -signal.SIGTERM and "returned" not in done.stdout
    assert done.stderr == (
        f"error: qwen3: note 'Sums' ({path}): still running 2 s after its time limit of 1 s "
        "(NNCANON_NOTE_TIMEOUT), in a call that does not return to Python; stopping the build\n"
    )
