"""A damaged release record, library record or facts file is one ``error:`` line naming the file, the field and
the fix, from ``python -m generator releases`` and ``releases --check`` alike (issue 46): cut short, not text, an
array for an object, a field missing or of another type, and a record's ``transformers`` field edited."""

from __future__ import annotations

import json
import re

import pytest
from one_line import cli_error

from generator.__main__ import main
from generator.facts import release_record


def _facts(family: str, release: str = "5.23.0") -> dict:
    return {"family": family, "versions": {"transformers": release},
            "hosts": [{"path": "model.layers[i]", "values": [
                {"name": "layer_input", "read_at": "the module's own input", "availability": {"eager": True},
                 "writable": True}]}],
            "relations": [{"host": "model.layers[i]", "text": "a == b", "errors": {"eager": "0"}, "skipped": {}}]}


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """A repository whose records were written from the facts of NNCANON_BUILD (llama and gpt2 under 5.23.0)."""
    monkeypatch.setattr(release_record, "RECORDS", tmp_path / "releases")
    monkeypatch.setattr(release_record, "LIBRARY_RECORD", tmp_path / "nncanon" / "verified_releases.json")
    monkeypatch.setattr(release_record, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    (tmp_path / "nncanon").mkdir()
    facts = tmp_path / "build" / "facts"
    facts.mkdir(parents=True)
    for family in ("llama", "gpt2"):
        (facts / f"{family}.json").write_text(json.dumps(_facts(family)), encoding="utf-8")
    assert main(["releases"]) == 0
    assert main(["releases", "--check"]) == 0
    return tmp_path


def _edit(path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


FILES = {"record": "releases/transformers-5.23.0.json", "library": "nncanon/verified_releases.json",
         "facts": "build/facts/llama.json"}
FIXES = {"record": "git checkout -- releases/transformers-5.23.0.json) or write it again",
         "library": "git checkout -- nncanon/verified_releases.json) or write it again",
         "facts": "collect it again: python -m generator verify --force llama"}
#: (what is done to the file, what the error says of it)
DAMAGE = {
    "cut short": (lambda p: p.write_bytes(p.read_bytes()[:-9]), r"not valid JSON \(.*: line \d+, column \d+\)"),
    "binary": (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff"), r"not UTF-8 text \(byte \d\)"),
    "an array": (lambda p: p.write_text("[]"), "the file is an array, expected an object"),
}
SHAPES = {
    ("record", "missing key"): (lambda d: d.pop("families"), "field 'families' is missing"),
    ("record", "wrong type"): (lambda d: d["families"]["llama"]["values"]["model.layers[i]::layer_input"]
                               .update(writable="yes"),
                               r"field \"families.llama.values\['model.layers\[i\]::layer_input'\].writable\" is a "
                               "string, expected true or false"),
    ("library", "missing key"): (lambda d: d.update(llama=None), "field 'llama' is null, expected an array"),
    ("library", "wrong type"): (lambda d: d.update(llama=[5.23]), r"field 'llama\[0\]' is a number, expected a string"),
    ("facts", "missing key"): (lambda d: d["versions"].pop("transformers"), "field 'versions.transformers' is missing"),
    ("facts", "wrong type"): (lambda d: d.update(hosts={}), "field 'hosts' is an object, expected an array"),
}


def _cases():
    damaged = [(kind, name, damage, says) for kind in FILES for name, (damage, says) in DAMAGE.items()]
    damaged += [(kind, name, lambda p, change=change: _edit(p, change), says)
                for (kind, name), (change, says) in SHAPES.items()]
    for command in ("write", "check"):
        for kind, name, damage, says in damaged:
            if not (kind == "library" and command == "write"):  # writing makes the library record afresh, unread
                argv = ["releases"] + (["--check"] if command == "check" else [])
                yield pytest.param(argv, kind, damage, says, id=f"{command}-{kind}-{name}")


@pytest.mark.parametrize("argv, kind, damage, says", list(_cases()))
def test_a_damaged_file_is_one_line_naming_it_the_field_and_the_fix(kept, capsys, argv, kind, damage, says):
    damage(kept / FILES[kind])
    shown, fix = FILES[kind], FIXES[kind]
    if kind == "record" and argv == ["releases"]:  # writing replaces this release's own record: damage another's
        (kept / shown).rename(kept / shown.replace("5.23.0", "5.22.0"))
        shown, fix = shown.replace("5.23.0", "5.22.0"), fix.replace("5.23.0", "5.22.0")
    err = cli_error(capsys, argv)
    assert err.startswith(f"error: {shown}: ") and fix in err and re.search(says, err), err


@pytest.mark.parametrize("argv", [["releases"], ["releases", "--check"]], ids=["write", "check"])
def test_an_edited_transformers_field_is_named(kept, capsys, argv):
    """It once blamed verified_releases.json, which lists the families under the record's field, not its name."""
    other = kept / "releases" / "transformers-5.22.0.json"  # another release's: writing replaces 5.23.0's own
    other.write_text((kept / FILES["record"]).read_text(encoding="utf-8"), encoding="utf-8")
    _edit(other, lambda d: d.update(transformers="5.22.0"))
    assert main(["releases"]) == 0 and main(["releases", "--check"]) == 0
    _edit(other, lambda d: d.update(transformers="5.99.0"))
    err = cli_error(capsys, argv)
    assert err.startswith("error: releases/transformers-5.22.0.json: field 'transformers' is '5.99.0' but the file is "
                          "named for '5.22.0'; set it back to '5.22.0'"), err


def test_a_record_not_named_for_a_release_is_named(kept, capsys):
    (kept / "releases" / "transformers-latest.json").write_text(
        (kept / FILES["record"]).read_text(encoding="utf-8").replace('"5.23.0"', '"latest"'), encoding="utf-8")
    err = cli_error(capsys, ["releases", "--check"])
    assert "releases/transformers-latest.json: 'latest' is not a transformers release" in err, err


def test_facts_filed_under_another_familys_name_are_named(kept, capsys):
    _edit(kept / FILES["facts"], lambda d: d.update(family="gpt2"))
    err = cli_error(capsys, ["releases", "--check"])
    assert "llama.json: field 'family' is 'gpt2' but the file is named llama.json" in err, err


@pytest.mark.parametrize("text", ['{"llama": ["5.2', "[]", '{"llama": "5.23.0"}'])
def test_the_library_names_its_damaged_record(tmp_path, monkeypatch, text):
    """support() reads nncanon/verified_releases.json on every model: json's message named no file."""
    from nncanon.guards import releases

    (tmp_path / "verified_releases.json").write_text(text, encoding="utf-8")
    monkeypatch.setattr(releases, "files", lambda package: tmp_path)
    with pytest.raises(ValueError, match=rf"^{tmp_path}/verified_releases.json: damaged \(.*\); reinstall nncanon, "
                                         "or in a checkout: git checkout -- nncanon/verified_releases.json$"):
        releases.verified_on("llama")


def test_a_full_disk_names_the_records_directory_and_keeps_the_records_whole(kept, capsys, monkeypatch):
    import errno
    from pathlib import Path

    before = {p: p.read_bytes() for p in (kept / FILES["record"], kept / FILES["library"])}
    write_text = Path.write_text

    def full(path, text, *args, **kwargs):
        write_text(path, text[: len(text) // 2], *args, **kwargs)  # as a disk filling up mid-file does
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    err = cli_error(capsys, ["releases"])
    assert err == (f"error: {kept}/releases: the disk holding it is full (No space left on device); free space there "
                   "and run the command again\n")
    assert {p: p.read_bytes() for p in before} == before and not list((kept / "releases").glob(".*"))
