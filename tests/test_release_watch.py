"""make release-watch (generator/facts/watch.py, watch_report.py): one real cycle on the installed transformers, the
install step injected (nothing is installed), two real families verified and one that fails: the candidate record
holds the families verified only, REPORT.md gives each family's result, what moved and the triage; make
release-accept keeps the candidate and refuses one that drops a kept family."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import transformers

from generator.checkpoint.checkpoints import cache_root
from generator.facts import newest, release_record, watch
from generator.facts.watch_report import Watched, read_outcomes, report

REPO = Path(__file__).resolve().parents[1]
RELEASE = transformers.__version__  # the locked release, whose record is kept
FAMILIES = ["gpt2", "llama"]
#: a name no YAML has: its row fails with a one-line reason, as a family a release breaks does
BROKEN = "no_such_family"


def _stale(facts: Path) -> None:
    """An older facts file a failed family leaves behind: of another release, it must not reach the record."""
    facts.mkdir(parents=True)
    (facts / "opt.json").write_text(json.dumps({"family": "opt", "versions": {"transformers": "5.0.0"}, "hosts": [],
                                                "relations": []}), encoding="utf-8")


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    build = tmp_path_factory.mktemp("build")
    installed = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(newest, "BUILD", build)
        mp.setattr(watch, "WATCH", build / "release-watch")
        mp.setenv("NNCANON_CACHE", str(cache_root()))  # the run's tiny checkpoints, not built again
        _stale(newest.build_of(RELEASE) / "facts")
        result = watch.watch(sys.executable, RELEASE, installer=lambda python, release: installed.append(release),
                             families=[*FAMILIES, BROKEN])
    assert installed == [RELEASE]
    return result, build


def test_the_candidate_holds_the_families_verified_only(watched):
    result, build = watched
    candidate = build / "release-watch" / RELEASE / f"transformers-{RELEASE}.json"
    assert result.candidate == candidate
    made = release_record.read_record(candidate)
    assert sorted(made["families"]) == FAMILIES  # not the failed one, not the stale opt
    kept = release_record.read_record(release_record.record_path(RELEASE))
    assert {f: kept["families"][f] for f in FAMILIES} == made["families"]
    assert (build / "release-watch" / "latest").read_text() == f"{RELEASE}\n"


def test_verify_outcomes_gives_each_family_and_the_releases(watched):
    result, build = watched
    outcomes = read_outcomes(build / "release-watch" / RELEASE / "outcomes.json")
    assert outcomes["transformers"] == RELEASE and outcomes["torch"] and outcomes["nnsight"]
    rows = {row["family"]: row for row in outcomes["families"]}
    assert [rows[f]["result"] for f in FAMILIES] == ["verified", "verified"]
    assert rows[BROKEN]["result"] == "failed" and BROKEN in rows[BROKEN]["error"]
    assert "\n" not in rows[BROKEN]["error"]


def test_the_report_gives_each_result_what_moved_and_the_triage(watched):
    result, build = watched
    text = (build / "release-watch" / RELEASE / "REPORT.md").read_text()
    assert f"# transformers {RELEASE}: release watch" in text
    assert "is **inside** the declared range" in text
    assert "| gpt2 | verified |" in text and "| llama | verified |" in text
    assert f"| {BROKEN} | failed |" in text
    assert f"- failed: {BROKEN}" in text
    assert f"against releases/transformers-{RELEASE}.json: nothing moved" in text  # the kept record says the same
    triage = text.split("## Triage", 1)[1]
    assert f"**{BROKEN}**" in triage and f"verify --force {BROKEN}" in triage
    assert f"make release-accept RELEASE={RELEASE}" in triage
    assert not result.clean()


def test_a_moved_value_is_listed_under_its_family(watched):
    result, _ = watched
    moved = Watched(**{**result.__dict__, "changes": ["llama value model.layers[i]::layer_input",
                                                      "llama relation model.layers[i]::a == b", "gpt2 is kept but "
                                                      "was not collected"]})
    text = report(moved)
    assert "3 moved (2 families)" in text
    assert "- **llama** (2): `value model.layers[i]::layer_input`; `relation model.layers[i]::a == b`" in text
    assert "Read what moved above" in text


def test_an_install_pip_refuses_is_reported_and_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(newest, "BUILD", tmp_path)
    monkeypatch.setattr(watch, "WATCH", tmp_path / "release-watch")

    def refused(python, release):
        raise newest.NewestError("transformers==9.9.9: the install failed (ResolutionImpossible)")

    monkeypatch.setattr(newest, "install", refused)
    assert watch.main(["--python", sys.executable, "--release", "9.9.9"]) == 1
    text = (tmp_path / "release-watch" / "9.9.9" / "REPORT.md").read_text()
    assert "## Stopped" in text and "ResolutionImpossible" in text
    assert "make release-watch RELEASE=9.9.9" in text
    assert "there is triage to do" in capsys.readouterr().out


@pytest.mark.parametrize(("inside", "failed", "code"), [(True, False, 0), (True, True, 1), (False, True, 0)])
def test_a_failure_fails_inside_the_range_only(monkeypatch, inside, failed, code):
    rows = [{"family": "llama", "result": "failed" if failed else "verified", "error": "x"}]
    done = Watched("5.26.0", ">=5.23,<5.26", inside=inside, outcomes={"families": rows}, candidate=Path("c.json"))
    monkeypatch.setattr(watch, "watch", lambda *a, **k: done)
    monkeypatch.setattr(watch, "WATCH", Path("build") / "release-watch")
    assert watch.main(["--python", "python", "--release", "5.26.0"]) == code


@pytest.fixture
def records(tmp_path, monkeypatch, watched):
    """releases/ and the library's record in tmp_path, the watch's candidate of RELEASE in its build directory."""
    _, build = watched
    monkeypatch.setattr(release_record, "RECORDS", tmp_path / "releases")
    monkeypatch.setattr(release_record, "LIBRARY_RECORD", tmp_path / "verified_releases.json")
    monkeypatch.setattr(watch, "WATCH", build / "release-watch")
    return tmp_path


def test_accept_keeps_the_candidate_and_lists_its_families(records):
    path, added = watch.accept(RELEASE)
    assert path == records / "releases" / f"transformers-{RELEASE}.json"
    assert path.read_text() == watch.candidate_path(RELEASE).read_text() and added == FAMILIES
    assert json.loads((records / "verified_releases.json").read_text()) == {f: [RELEASE] for f in FAMILIES}


def test_accept_refuses_a_candidate_that_drops_a_kept_family_unless_told(records, capsys):
    (records / "releases").mkdir()
    shutil.copy(REPO / "releases" / f"transformers-{RELEASE}.json",
                records / "releases")
    assert watch.main(["--accept", RELEASE]) == 1
    err = capsys.readouterr().err
    assert "leaves out" in err and "opt" in err and "--drop" in err
    kept = release_record.read_record(records / "releases" / f"transformers-{RELEASE}.json")["families"]
    dropped = sorted(set(kept) - set(FAMILIES))
    assert watch.main(["--accept", RELEASE, "--drop", *dropped]) == 0
    assert sorted(release_record.read_record(release_record.record_path(RELEASE))["families"]) == FAMILIES


def test_accept_without_a_watch_says_to_watch_first(records, capsys):
    assert watch.main(["--accept", "9.9.8"]) == 1
    assert "make release-watch RELEASE=9.9.8" in capsys.readouterr().err


def test_the_watch_starts_in_a_venv_with_nothing_installed():
    """make release-watch runs the module with the fresh venv's python, before the install: it imports no package
    the install brings (packaging, yaml, torch, transformers, the library) until then."""
    code = ("import sys\n"
            "for name in ('packaging', 'yaml', 'torch', 'transformers', 'nnsight', 'nncanon', 'jinja2'):\n"
            "    sys.modules[name] = None\n"
            "from generator.facts import watch\n"
            "try:\n"
            "    watch.newest.verify_release('python', '9.9.9', installer=lambda python, release: sys.exit(7))\n"
            "except SystemExit as stop:\n"
            "    sys.exit(stop.code)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 7, done.stderr[-2000:]  # the install came first


def test_the_scheduled_job_runs_the_watch_and_prints_its_report():
    job = REPO / ".ci" / "release-watch"
    assert os.access(job, os.X_OK)
    text = job.read_text()
    assert "make release-watch" in text and "REPORT.md" in text
    assert subprocess.run(["bash", "-n", str(job)]).returncode == 0


def test_a_verify_that_stops_before_its_table_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(newest, "BUILD", tmp_path)
    monkeypatch.setattr(watch, "WATCH", tmp_path / "release-watch")
    monkeypatch.setattr(newest, "pip_check", lambda python, inside: [])
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1))  # no outcomes file
    result = watch.watch(sys.executable, RELEASE, installer=lambda python, release: None)
    assert "wrote no outcomes" in result.record_error and result.candidate is None
    text = (tmp_path / "release-watch" / RELEASE / "REPORT.md").read_text()
    assert "wrote no outcomes" in text and "candidate record: none written" in text
