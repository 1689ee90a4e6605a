"""The build under faults: two builds at once, a kill mid-swap, leftovers of killed builds, stale facts,
the build date, and what ``python -m generator`` prints for each error the build raises on purpose.

Fast: every build here renders the hand-written fixture facts (tests/fixtures/facts), put in a
private build directory under the family's current cache key, so nothing is collected and torch
is never loaded. Builds in a subprocess run ``python -m generator build --site ...``.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import select
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from limits import HANG

from generator.recipe.family import get_family

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "facts"
FAMILY = "qwen3_5_moe_text"
# what a complete site holds (a sample from every part of it)
COMPLETE = [
    "index.html",
    "404.html",
    "sitemap.xml.gz",
    "search/search_index.json",
    "assets/nncanon.js",
    "families/index.html",
    f"families/{FAMILY}/index.html",
    f"facts/{FAMILY}.json",
    "facts/index.json",
    "llms.txt",
]


def quiet(line: str) -> None:
    pass


@pytest.fixture
def ws(tmp_path, monkeypatch) -> Path:
    """families/ holding only the fixture's family, and build/facts holding its fixture facts, cached."""
    families = tmp_path / "families"
    shutil.copytree(REPO / "families", families)
    for path in families.glob("*.yaml"):
        if path.stem != FAMILY:
            path.unlink()
    monkeypatch.setenv("NNCANON_FAMILIES", str(families))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    monkeypatch.delenv("NNCANON_TEST_PAUSE_SWAP", raising=False)
    put_facts(tmp_path, FAMILY, json.loads((FIXTURE / f"{FAMILY}.json").read_text()))
    put_docs_run(tmp_path)
    return tmp_path


def put_docs_run(ws: Path) -> None:
    """The hand-written pages' code as having run (tests/test_docs.py runs it), as the facts are cached."""
    from generator.notes.docs_run import PAGES, page_key

    directory = ws / "build" / "docs_run"
    directory.mkdir(parents=True, exist_ok=True)
    for page in PAGES:
        (directory / f"{page}.key").write_text(page_key(page) + "\n")
    # and the Recipes page as having run on the family (tests/test_recipe_runs.py reads the real runs)
    from generator.facts.collect import cache_key
    from generator.notes.recipe_runs import run_key
    from generator.recipe.family import get_family

    runs = directory / "recipes"
    runs.mkdir(exist_ok=True)
    (runs / f"{FAMILY}.json").write_text(json.dumps({"served": [], "refused": {}, "cpu_seconds": 0}) + "\n")
    (runs / f"{FAMILY}.key").write_text(run_key(cache_key(get_family(FAMILY))) + "\n")


def put_facts(ws: Path, name: str, facts: dict) -> None:
    from generator.facts.collect import cache_key

    directory = ws / "build" / "facts"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps(dict(facts, family=name)))
    key = cache_key(get_family(name)) if (ws / "families" / f"{name}.yaml").exists() else "gone"
    (directory / f"{name}.key").write_text(key + "\n")


def complete(site: Path) -> None:
    missing = [rel for rel in COMPLETE if not (site / rel).is_file()]
    assert not missing, f"{site} is not a complete site: no {missing}"
    assert len([p for p in site.rglob("*") if p.is_file()]) > 30


def snapshot(site: Path) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def leftovers(ws: Path) -> list[str]:
    build = ws / "build"
    # .site.lock is the site's lock file, kept as build/.lock is (removing a flock'd file races its next holder)
    found = [*(p for p in ws.glob(".site.*") if p.name != ".site.lock"), *build.glob(".tmp-*"), *build.glob(".old-*"),
             *build.glob("facts/*.tmp")]
    return sorted(str(p.relative_to(ws)) for p in found)


def start(ws: Path, site: Path, pause: float | None = None, build: Path | None = None) -> subprocess.Popen:
    """``python -m generator build --site site`` in the workspace, stdout and stderr merged, unbuffered."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if build is not None:
        env["NNCANON_BUILD"] = str(build)
    if pause is not None:
        env["NNCANON_TEST_PAUSE_SWAP"] = str(pause)
    return subprocess.Popen(
        [sys.executable, "-m", "generator", "build", "--site", str(site)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(proc: subprocess.Popen, text: str, timeout: float = HANG) -> str:
    """Read proc's output until a line holds ``text``; returns what it read."""
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if text in line:
                return "".join(seen)
    proc.kill()
    raise AssertionError(f"no line with {text!r} from the build; it printed:\n{''.join(seen)}")


# ---------------------------------------------------------------- two builds at once


def test_two_builds_at_once_leave_one_complete_site(ws):
    site = ws / "site"
    first = start(ws, site, pause=4)  # holds the lock 4 s between the swap's renames
    head = wait_for(first, "pausing")
    second = start(ws, site)
    out2, _ = second.communicate(timeout=HANG)
    out1, _ = first.communicate(timeout=HANG)
    assert first.returncode == 0, head + out1
    assert second.returncode == 0, out2
    assert [line for line in out2.splitlines() if "another build is running" in line], out2
    complete(site)
    assert leftovers(ws) == []


def test_two_builds_from_two_build_directories_into_one_site_take_turns(ws):
    """Two build locks do not exclude each other: the site's own lock does, so neither writes the other's
    staging tree or swaps it in half written (issue 46: one failed on a file the other had moved)."""
    site = ws / "site"
    shutil.copytree(ws / "build", ws / "build2")
    first = start(ws, site, pause=4)
    head = wait_for(first, "pausing")
    second = start(ws, site, build=ws / "build2")
    out2, _ = second.communicate(timeout=HANG)
    out1, _ = first.communicate(timeout=HANG)
    assert first.returncode == 0, head + out1
    assert second.returncode == 0, out2
    assert [line for line in out2.splitlines() if f"another build is writing {site}" in line], out2
    assert not [line for line in out2.splitlines() if "another build is running" in line], out2
    complete(site)
    assert leftovers(ws) == []


# ---------------------------------------------------------------- a kill mid-swap


def test_a_kill_between_the_swap_renames_keeps_the_old_site(ws):
    from generator.build import build
    from generator.recipe.fields import FamilyYamlError

    site = ws / "site"
    build(site=site, progress=quiet)
    (site / "the-old-site.txt").write_text("the site before the killed build\n")
    before = snapshot(site)

    killed = start(ws, site, pause=120)
    wait_for(killed, "pausing")
    killed.kill()
    killed.communicate(timeout=HANG)
    assert not site.exists() and (ws / ".site.old").is_dir()  # the state the kill leaves

    yaml_path = ws / "families" / f"{FAMILY}.yaml"
    good = yaml_path.read_text()
    yaml_path.write_text(good.replace("tagline:", "tagline_typo:", 1))
    with pytest.raises(FamilyYamlError):
        build(site=site, progress=quiet)  # a failed build after the kill still leaves the old site
    assert snapshot(site) == before
    assert leftovers(ws) == []

    yaml_path.write_text(good)
    build(site=site, progress=quiet)
    complete(site)
    assert not (site / "the-old-site.txt").exists()
    assert leftovers(ws) == []


def test_a_missing_site_with_an_old_one_beside_it_is_restored_first(ws):
    from generator.build import build

    site = ws / "site"
    build(site=site, progress=quiet)
    site.rename(ws / ".site.old")
    (ws / ".site.new").mkdir()
    (ws / ".site.new" / ".nncanon-site").write_text("")  # a build marks its staging tree before mkdocs writes
    (ws / ".site.new" / "half.html").write_text("<p>half a site</p>")
    messages = []
    build(site=site, progress=messages.append)
    complete(site)
    assert any("restoring" in m for m in messages), messages
    assert leftovers(ws) == []


# ---------------------------------------------------------------- leftovers of killed builds


def test_leftovers_of_killed_builds_do_not_stop_the_next(ws):
    from generator.build import build

    build_dir = ws / "build"
    half = build_dir / "docs" / "families"  # build/docs with its marker already deleted: a half-deleted tree
    half.mkdir(parents=True)
    (half / "half.md").write_text("# half\n")
    (build_dir / ".tmp-docs-x1" / "families").mkdir(parents=True)
    (build_dir / ".old-docs-x2" / "docs").mkdir(parents=True)
    (build_dir / "facts" / f"{FAMILY}.json.tmp").write_text("{")  # as older builds named it
    (build_dir / "facts" / f".{FAMILY}.json.999999999.tmp").write_text("{")  # a killed process's
    (ws / ".site.new" / "assets").mkdir(parents=True)
    (ws / ".site.new" / ".nncanon-site").write_text("")  # a build marks its staging tree before mkdocs writes
    site = ws / "site"
    build(site=site, progress=quiet)
    complete(site)
    assert leftovers(ws) == []
    assert not (build_dir / "docs" / "families" / "half.md").exists()
    assert not (site / "families" / "half" / "index.html").exists()


# ---------------------------------------------------------------- stale facts


def test_a_family_whose_yaml_was_removed_is_not_published(ws):
    from generator.build import build

    put_facts(ws, "gone", json.loads((FIXTURE / f"{FAMILY}.json").read_text()))
    site = ws / "site"
    build(site=site, progress=quiet)
    complete(site)
    assert not (site / "families" / "gone").exists() and not (site / "facts" / "gone.json").exists()
    published = json.loads((site / "facts" / "index.json").read_text())
    assert [e["family"] for e in published["families"]] == [FAMILY]
    assert "gone" not in (site / "llms.txt").read_text()
    assert "gone" not in (site / "families" / "index.html").read_text()


# ---------------------------------------------------------------- the build date


def _day(year: int, month: int, day: int) -> type[datetime]:
    class Day(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(year, month, day, 12, tzinfo=UTC)

    return Day


def _gzip_mtime(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[4:8], "little")


def test_builds_on_different_days_are_byte_identical(ws, monkeypatch):
    import mkdocs.utils

    from generator.build import build

    monkeypatch.setattr(mkdocs.utils, "datetime", _day(2031, 5, 17))
    build(site=ws / "site-a", progress=quiet)
    monkeypatch.setattr(mkdocs.utils, "datetime", _day(2032, 11, 2))
    build(site=ws / "site-b", progress=quiet)
    a, b = snapshot(ws / "site-a"), snapshot(ws / "site-b")
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    assert "SOURCE_DATE_EPOCH" not in os.environ  # set for mkdocs only, then restored

    from generator.site.mkdocs_run import DEFAULT_SOURCE_DATE_EPOCH

    assert _gzip_mtime(ws / "site-a" / "sitemap.xml.gz") == DEFAULT_SOURCE_DATE_EPOCH


def test_source_date_epoch_is_honoured(ws, monkeypatch):
    from generator.build import build

    epoch = 1800000000  # 2027-01-15 08:00 UTC: the sitemap's date is that day
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(epoch))
    build(site=ws / "site", progress=quiet)
    assert _gzip_mtime(ws / "site" / "sitemap.xml.gz") == epoch - epoch % 86400
    assert gzip.decompress((ws / "site" / "sitemap.xml.gz").read_bytes()) == (ws / "site" / "sitemap.xml").read_bytes()


# ---------------------------------------------------------------- what python -m generator prints


def _made(cls: type[BaseException], message: str) -> BaseException:
    """An instance of cls carrying message, whatever its constructor's signature (others own them)."""
    error = cls.__new__(cls)
    BaseException.__init__(error, message)
    return error


def _errors() -> dict[str, BaseException]:
    from generator.build import BuildBusy
    from generator.checkpoint.checkpoints import PinMismatch
    from generator.facts.collect import ClaimError
    from generator.notes.docs_run import DocsError
    from generator.notes.examples import NoteError
    from generator.recipe.fields import FamilyYamlError
    from generator.site.render import FactsError, MkdocsBuildError
    from generator.site.safe_urls import UnsafeUrlError

    return {
        "FamilyYamlError": FamilyYamlError("families/x.yaml", "tagline", "missing"),
        "config": FamilyYamlError("families/x.yaml", "tiny.config", "Qwen3Config rejects it: bad head_dim"),
        "PinMismatch": _made(PinMismatch, "families/x.yaml: tiny.sha256 is abc, the built checkpoint's is def"),
        "ClaimError": _made(ClaimError, "x: claim identity 'a + b == c': off by 3.0"),
        "NoteError": _made(NoteError, "x: note 'The mixture' (families/x.notes.md:12): no\n    a == b"),
        "DocsError": DocsError("docs_src/recipes.md, python block 3 (line 57): an assert fails: assert x"),
        "FactsError": FactsError("build/facts/x.json: field 'hosts' is missing"),
        "MkdocsBuildError": MkdocsBuildError("mkdocs build --strict of build/docs failed:\n  WARNING: a\n  WARNING: b"),
        "UnsafeUrlError": UnsafeUrlError("1 unsafe URL(s):\n  families/x/index.html:3: <a href='javascript:x'>"),
        "BuildBusy": BuildBusy("another build is running in build (pid 12); gave up after 5 s"),
        "permission": PermissionError(errno.EACCES, "Permission denied", "site"),
        "disk full": OSError(errno.ENOSPC, "No space left on device"),
        "bare OSError": OSError("the disk went away"),
    }


ERRORS = [
    "FamilyYamlError",
    "config",
    "PinMismatch",
    "ClaimError",
    "NoteError",
    "DocsError",
    "FactsError",
    "MkdocsBuildError",
    "UnsafeUrlError",
    "BuildBusy",
    "permission",
    "disk full",
    "bare OSError",
]


def test_the_error_list_is_complete():
    assert list(_errors()) == ERRORS


@pytest.mark.parametrize("name", ERRORS)
def test_each_deliberate_error_is_one_error_line(name, monkeypatch, capsys):
    import generator.build
    from generator.__main__ import main

    error = _errors()[name]

    def fail(**kwargs):
        raise error

    monkeypatch.setattr(generator.build, "build", fail)
    assert main(["build"]) == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0].startswith("error: ") and lines[0] != "error: ", err
    # a full disk's own text names no directory: the line names those the build writes (generator/disk.py)
    said = "the disk is full (No space left on device)" if name == "disk full" else str(error).splitlines()[0]
    assert said in lines[0]
    assert [line for line in lines if line.startswith("error")] == lines[:1], err
    assert all(line.startswith("  ") for line in lines[1:]), err
    assert "Traceback" not in err + out


def test_ctrl_c_says_interrupted(monkeypatch, capsys):
    import generator.build
    from generator.__main__ import main

    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(generator.build, "build", interrupted)
    assert main(["build"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_a_bug_keeps_its_traceback(monkeypatch):
    import generator.build
    from generator.__main__ import main

    def bug(**kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(generator.build, "build", bug)
    with pytest.raises(ZeroDivisionError):
        main(["build"])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args], cwd=REPO, capture_output=True, text=True, timeout=HANG
    )


def test_cli_a_malformed_yaml_and_a_file_system_error_are_one_line(ws):
    yaml_path = ws / "families" / f"{FAMILY}.yaml"
    good = yaml_path.read_text()
    yaml_path.write_text(good.replace("tagline:", "tagline_typo:", 1))
    run = _cli("build", "--site", str(ws / "site"))
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("error: ") and f"{FAMILY}.yaml" in run.stderr.splitlines()[0], run.stderr
    assert "Traceback" not in run.stderr

    yaml_path.write_text(good)
    (ws / "a-file").write_text("not a directory\n")
    run = _cli("build", "--site", str(ws / "a-file" / "site"))
    assert run.returncode == 1, run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith("error: ")], run.stderr
    assert run.stderr.count("error: ") == 1 and "a-file" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_cli_gives_up_waiting_for_the_lock_after_lock_timeout(ws):
    import fcntl

    lock = ws / "build" / ".lock"
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        run = _cli("build", "--site", str(ws / "site"), "--lock-timeout", "0.5")
    assert run.returncode == 1
    assert "another build is running" in run.stdout
    assert run.stderr.startswith("error: another build is running") and "gave up after 0.5 s" in run.stderr
    assert not (ws / "site").exists()
