"""``python -m generator verify --keep-going`` (issue 50): every family runs even when one fails, then one table
(family, result, seconds, the error in one line), and the exit status is 1 if any failed.

The failing families fail for real (a YAML the recipe stage refuses; a bug inside collection, which keeps its
traceback); the passing one's collection is stubbed (a real one takes a minute on a tiny checkpoint, and verify's
own tests cover it).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from generator import build
from generator.__main__ import main

REPO = Path(__file__).resolve().parents[1]


def _families(tmp_path: Path, edits: dict[str, str | None]) -> Path:
    """families/ holding each named family and its notes, its YAML's top-level key replaced by the line given."""
    directory = tmp_path / "families"
    directory.mkdir()
    for name, edit in edits.items():
        lines = (REPO / "families" / f"{name}.yaml").read_text(encoding="utf-8").splitlines()
        if edit is not None:
            lines = [line for line in lines if not line.startswith(f"{edit.split(':', 1)[0]}:")] + [edit]
        (directory / f"{name}.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        shutil.copy(REPO / "families" / f"{name}.notes.md", directory / f"{name}.notes.md")
    return directory


@pytest.fixture
def stubbed(tmp_path, monkeypatch):
    """qwen3 collects (stubbed); mistral's collection meets a bug; every other family collects for real."""
    real = build.cached_facts

    def cached_facts(family, **kwargs):
        name = getattr(family, "family", family)  # a Family, or its name
        if name == "qwen3":
            return {}, True
        if name == "mistral":
            raise RuntimeError("a bug in collection\nits second line")
        return real(family, **kwargs)

    monkeypatch.setattr(build, "cached_facts", cached_facts)
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    return tmp_path


def test_keep_going_runs_every_family_then_prints_the_table(stubbed, monkeypatch, capsys):
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(stubbed, {
        "llama": "notes: ['oops']", "qwen3": None, "mistral": None, "olmo": "releases: '>=99.0'"})))
    assert main(["verify", "--keep-going", "llama", "qwen3", "mistral", "olmo"]) == 1
    captured = capsys.readouterr()
    table = captured.out[captured.out.index("family "):].splitlines()
    assert table[0].split() == ["family", "result", "seconds", "error"]
    rows = {line.split()[0]: line for line in table[1:-1]}
    assert list(rows) == ["llama", "qwen3", "mistral", "olmo"]  # in the order asked, each once
    assert rows["llama"].split()[1] == "failed"
    assert f"{stubbed}/families/llama.yaml: field 'notes[0]': expected a mapping" in rows["llama"]
    assert rows["qwen3"].split()[1:] == ["verified", rows["qwen3"].split()[2]]  # no error
    assert rows["mistral"].split()[1] == "failed" and rows["mistral"].endswith("RuntimeError: a bug in collection")
    assert rows["olmo"].split()[1:3] == ["left", "out"] and "releases: >=99.0" in rows["olmo"]
    assert table[-1] == "2 of 4 families failed: llama, mistral (2 failed, 1 verified, 1 left out)"
    # the bug keeps its traceback (on stderr, naming the family); the YAML's error is its one line in the table
    assert "mistral:\nTraceback" in captured.err and "RuntimeError: a bug in collection" in captured.err
    assert "llama" not in captured.err


def test_keep_going_exits_0_when_none_failed(stubbed, monkeypatch, capsys):
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(stubbed, {"qwen3": None})))
    assert main(["verify", "--keep-going", "qwen3"]) == 0
    out = capsys.readouterr().out
    # the seconds column is the machine's (a busy one takes a second even for a stub): its shape, not its value
    assert out.rstrip().endswith("no family failed (1 verified)")
    assert re.search(r"^qwen3 +verified +\d+\.\d$", out, re.M), out


def test_without_keep_going_the_first_failure_ends_the_run(stubbed, monkeypatch, capsys):
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(stubbed, {"llama": "notes: ['oops']", "qwen3": None})))
    assert main(["verify", "llama", "qwen3"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {stubbed}/families/llama.yaml: field 'notes[0]'")
    assert "qwen3" not in captured.out and "family " not in captured.out


def test_outcomes_writes_each_row_as_json_and_a_claims_details_stay_on_its_line(stubbed, monkeypatch, capsys):
    """``--outcomes FILE`` (make release-watch reads it; it implies --keep-going): each family's row and the releases
    it ran under; an error whose first line ends in a colon goes on with its first detail and how many more."""
    import json

    import transformers

    from generator.facts.claim_error import ClaimError

    real = build.cached_facts

    def cached_facts(family, **kwargs):
        if getattr(family, "family", family) == "mistral":
            raise ClaimError("mistral", "relations", "2 do not hold:\n  'a == b' is off by 0.1\n  'c == d' too")
        return real(family, **kwargs)

    monkeypatch.setattr(build, "cached_facts", cached_facts)
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(stubbed, {"qwen3": None, "mistral": None})))
    outcomes = stubbed / "out" / "outcomes.json"
    assert main(["verify", "--outcomes", str(outcomes), "qwen3", "mistral"]) == 1
    written = json.loads(outcomes.read_text())
    assert written["transformers"] == transformers.__version__ and written["torch"] and written["nnsight"]
    rows = {row["family"]: row for row in written["families"]}
    assert rows["qwen3"]["result"] == "verified" and rows["qwen3"]["error"] == ""
    said = "mistral: claim relations: 2 do not hold: 'a == b' is off by 0.1 (and 1 more)"
    assert rows["mistral"] == {**rows["mistral"], "result": "failed", "error": said}
    assert said in capsys.readouterr().out  # the table's row says the same
