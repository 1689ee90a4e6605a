"""``verify --jobs N``: the families to collect are collected by N processes, and the result is the sequential
run's: the same facts byte for byte, the same outcome table, and a family that fails in a worker fails as it does
without --jobs (its error raised in the caller's process, named by its one line)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from generator.__main__ import main

REPO = Path(__file__).resolve().parents[1]
#: cheap families of three lines (a post-norm encoder, a GPT-2 block, a recurrent mixer)
FAMILIES = ("gpt2", "bert", "mamba")


def _families(tmp_path: Path, wrong_tag: str | None = None) -> Path:
    directory = tmp_path / "families"
    directory.mkdir()
    for name in FAMILIES:
        shutil.copy(REPO / "families" / f"{name}.yaml", directory)
        shutil.copy(REPO / "families" / f"{name}.notes.md", directory)
    if wrong_tag:
        path = directory / f"{wrong_tag}.yaml"
        data = yaml.safe_load(path.read_text())
        data["tags"].append("Mixture of experts")  # their MLPs are dense: collect refuses the tag
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return directory


def test_two_processes_write_the_sequential_facts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(tmp_path)))
    facts = {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / f"build-{jobs}"))
        assert main(["verify", "--keep-going", "--jobs", jobs]) == 0
        out = capsys.readouterr().out
        assert out.rstrip().endswith("no family failed (3 verified)"), out
        facts[jobs] = {name: (tmp_path / f"build-{jobs}" / "facts" / f"{name}.json").read_bytes() for name in FAMILIES}
    assert facts["1"] == facts["2"]
    # a second run finds every family current: no worker is started
    assert main(["verify", "--jobs", "2"]) == 0
    assert "processes" not in capsys.readouterr().out


def test_a_family_failing_in_a_worker_fails_as_without_jobs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(tmp_path, wrong_tag="bert")))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    assert main(["verify", "--keep-going", "--jobs", "2"]) == 1
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out[out.index("family "):].splitlines()[1:-1]}
    assert [row.split()[1] for row in rows.values()] == ["failed", "verified", "verified"], out  # bert, gpt2, mamba
    assert "tag 'Mixture of experts': needs a mixture MLP" in rows["bert"]
    # without --keep-going: the one line of the error, as without --jobs, and the exit status 1
    assert main(["verify", "--jobs", "2", "--force"]) == 1
    err = capsys.readouterr().err
    assert "tag 'Mixture of experts': needs a mixture MLP" in err and "Traceback" not in err


def test_jobs_must_be_a_positive_number(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["verify", "--jobs", "0"])
    assert "'0': a number of processes, 1 or more" in capsys.readouterr().err
