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


def _rows(out: str) -> dict[str, tuple[str, str]]:
    """The outcome table's rows: family -> (result, error), without the seconds."""
    lines = out[out.index("family "):].splitlines()[1:-1]
    return {line.split()[0]: (line.split()[1], " ".join(line.split()[3:])) for line in lines}


def test_two_processes_collect_as_one_does_and_a_failure_fails_as_without_jobs(tmp_path, monkeypatch, capsys):
    """bert given a tag its facts refute, gpt2 and mamba as they are: with --keep-going, one process and two write the
    same facts byte for byte and the same outcome table (bert failed, in a worker and again in the caller's process);
    a second run finds the two current and starts no worker; without --keep-going, the error's one line and status
    1, as without --jobs."""
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(tmp_path, wrong_tag="bert")))
    facts, rows = {}, {}
    for jobs in ("1", "2"):
        monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / f"build-{jobs}"))
        assert main(["verify", "--keep-going", "--jobs", jobs]) == 1
        out = capsys.readouterr().out
        rows[jobs] = _rows(out)
        assert out.rstrip().endswith("1 of 3 families failed: bert (1 failed, 2 verified)"), out
        facts[jobs] = {name: (tmp_path / f"build-{jobs}" / "facts" / f"{name}.json").read_bytes()
                       for name in FAMILIES if name != "bert"}
    assert "bert: failed in a worker" in out and "collecting it again here" in out, out
    assert rows["1"] == rows["2"] and facts["1"] == facts["2"]
    assert "tag 'Mixture of experts': needs a mixture MLP" in rows["2"]["bert"][1]
    # a second run finds gpt2 and mamba current: no worker is started
    assert main(["verify", "--jobs", "2", "gpt2", "mamba"]) == 0
    assert "processes" not in capsys.readouterr().out
    # without --keep-going: the one line of the error, as without --jobs, and the exit status 1
    assert main(["verify", "--jobs", "2", "--force", "bert", "gpt2"]) == 1
    err = capsys.readouterr().err
    assert "tag 'Mixture of experts': needs a mixture MLP" in err and "Traceback" not in err


def test_jobs_must_be_a_positive_number(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["verify", "--jobs", "0"])
    assert "'0': a number of processes, 1 or more" in capsys.readouterr().err
