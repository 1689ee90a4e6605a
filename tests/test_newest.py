"""make verify-newest (generator/facts/newest.py): the newest release comes from pip's index, not the Makefile; the
install keeps transformers' own dependencies; a failure fails inside the declared range only; what moved against the
newest kept record is printed, or "nothing moved". The steps that install and verify are stubbed: CI runs them."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from generator.facts import newest

REPO = Path(__file__).resolve().parents[1]


def _fake_python(tmp_path: Path, stdout: str, code: int = 0) -> str:
    """An executable that prints what ``python -m pip index versions transformers`` would."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{stdout}\nEOF\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_newest_release_is_the_index_s():
    assert "NEWEST ?=" not in (REPO / "Makefile").read_text()  # no number kept in the Makefile


def test_newest_published_reads_pips_answer(tmp_path):
    python = _fake_python(tmp_path, "transformers (5.26.1)\nAvailable versions: 5.26.1, 5.26.0, 5.25.0")
    assert newest.newest_published(python) == "5.26.1"
    with pytest.raises(newest.NewestError, match="found no release"):
        newest.newest_published(_fake_python(tmp_path, "ERROR: No matching distribution", code=1))


def test_the_install_pins_transformers_and_keeps_torch_and_nnsight_locked():
    wanted = newest.requirements("5.26.1")
    assert "transformers==5.26.1" in wanted and not any(w.startswith("transformers>") for w in wanted)
    assert "jinja2" in wanted  # the site extra: verify renders the notes
    others = newest.locked_others()
    assert any(o.startswith("torch==") for o in others) and any(o.startswith("nnsight==") for o in others)
    assert not any(o.startswith("transformers") for o in others)


def test_pip_check_lets_nncanons_own_range_be_outside_it(monkeypatch):
    said = "nncanon 0.1.0 has requirement transformers<5.26,>=5.23, but you have transformers 5.26.1.\n" \
           "tokenizers 0.30 has requirement huggingface-hub<2, but you have huggingface-hub 2.1.\n"
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, said, ""))
    assert len(newest.pip_check("python", inside=True)) == 2
    assert newest.pip_check("python", inside=False) == [said.splitlines()[1]]


@pytest.mark.parametrize(("release", "verified", "changes", "code"), [
    ("5.25.0", True, [], 0), ("5.25.0", False, [], 1), ("5.26.0", False, [], 0),
    ("5.25.0", True, ["llama value model.layers[i]::x"], 1)])
def test_a_failure_fails_inside_the_range_only(monkeypatch, tmp_path, capsys, release, verified, changes, code):
    monkeypatch.setattr(newest, "install", lambda python, release: None)
    monkeypatch.setattr(newest, "declared", lambda: ">=5.23,<5.26")
    monkeypatch.setattr(newest, "pip_check", lambda python, inside: [])
    monkeypatch.setattr(newest, "NEWEST_FILE", tmp_path / "newest-transformers")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0 if verified else 1))
    kept = REPO / "releases" / "transformers-5.25.0.json"
    monkeypatch.setattr(newest, "moved", lambda facts, release: (changes, kept))
    assert newest.main(["--python", "python", "--release", release]) == code
    out = capsys.readouterr()
    assert ("nothing moved" in out.out) == (not changes)
    assert (tmp_path / "newest-transformers").read_text() == f"{release}\n"
    if not verified and code == 0:
        assert "outside the declared range, not failing: generator verify" in out.err


def test_a_release_is_compared_with_the_newest_kept_record_not_newer_than_it():
    kept = {p.stem.removeprefix("transformers-") for p in (REPO / "releases").glob("transformers-*.json")}
    assert {"5.23.0", "5.24.0", "5.25.0"} <= kept
    assert newest.kept_before("5.24.0").name == "transformers-5.24.0.json"  # its own, once kept
    newest_kept = max(kept, key=lambda r: tuple(int(x) for x in r.split(".")))
    assert newest.kept_before("99.0.0").name == newest.kept_before().name == f"transformers-{newest_kept}.json"
    assert newest.kept_before("5.0.0").name == "transformers-5.23.0.json"  # older than every record: the oldest
