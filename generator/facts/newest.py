"""``make verify-newest``: every family verified again on the newest transformers published, and what moved.

``python -m generator.facts.newest --python VENV/bin/python`` asks pip's configured index for the newest transformers
release (no number is kept in the Makefile: a release published since is verified the day it appears), installs it
into that venv with its own dependencies (nncanon's other requirements as pyproject declares them, torch and nnsight
at the locked releases of ``constraints.txt``; nncanon itself without its dependencies, since a release outside the
declared range would contradict its own requirement), runs ``pip check``, verifies every family
(``generator verify --keep-going --force --jobs N`` (a process per core, up to four) into ``build/transformers-<release>``) and compares the release record its
facts make with the newest kept one (``releases/``), printing "nothing moved" or every value and relation that did.

A failure (a family, ``pip check``, a record that no longer says what the facts say) fails the run when the release
is inside the range pyproject declares: nncanon says it is verified there. Outside it the failure is reported and the
run passes: that is the news a widening of the range starts from (the Releases page, docs_src/contributing.md).
``make release-watch`` (:mod:`generator.facts.watch`) runs the same cycle (:func:`verify_release`, :func:`moved`)
and writes candidate records and a report from it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build"
#: where the newest verified release is written for `make releases` (the build directory's name carries it too)
NEWEST_FILE = BUILD / "newest-transformers"


class NewestError(RuntimeError):
    """A step of verify-newest that cannot go on (the index unreachable, an install that failed): one line."""


def newest_published(python: str) -> str:
    """The newest transformers release on pip's configured index (pre-releases left out, as pip leaves them)."""
    done = subprocess.run([python, "-m", "pip", "index", "versions", "transformers"], capture_output=True, text=True)
    found = re.search(r"^transformers \(([^)\s]+)\)", done.stdout, re.MULTILINE)
    if done.returncode != 0 or found is None:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise NewestError(f"pip index versions transformers found no release ({last}); is the index reachable?")
    return found.group(1)


def declared() -> str:
    """The transformers range pyproject declares (nncanon.guards.releases.VERIFIED says the same)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return next(re.sub(r"^transformers\s*", "", d) for d in project["dependencies"] if re.match(r"transformers\b", d))


def requirements(release: str) -> list[str]:
    """nncanon's requirements and its site extra (the build's), transformers at ``release``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["site"]]
    return [f"transformers=={release}" if re.match(r"transformers\b", d) else d for d in wanted]


def locked_others() -> list[str]:
    """constraints.txt's locks but transformers': the torch and nnsight every release is verified with."""
    lines = (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")
            and not re.match(r"transformers\b", line.strip())]


def install(python: str, release: str) -> None:
    pip = [python, "-m", "pip", "install", "-q"]
    for step in ([*pip, *requirements(release), *locked_others()], [*pip, "--no-deps", "-e", str(REPO)]):
        if subprocess.run(step, cwd=REPO).returncode != 0:
            raise NewestError(f"{' '.join(step[3:])}: the install failed (its output is above)")


def pip_check(python: str, inside: bool) -> list[str]:
    """``pip check``'s complaints; outside the range, nncanon's own transformers requirement is expected to be one."""
    done = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip() and not line.startswith("No broken")]
    return [line for line in lines if inside or not re.match(r"nncanon \S+ has requirement transformers", line)]


def build_of(release: str) -> Path:
    """Where a release's facts are collected: apart from the site's (``build/``), shared by both make targets."""
    return BUILD / f"transformers-{release}"


@dataclass
class Verified:
    """One release installed and verified in a venv (:func:`verify_release`): what ``make verify-newest`` prints and
    ``make release-watch`` reports from."""
    release: str
    spec: str  # the transformers range pyproject declares
    inside: bool
    build: Path
    pip_problems: list[str]  # pip check's complaints (nncanon's own range left out outside it)
    verified: bool  # generator verify exited 0: no family failed


def verify_release(python: str, release: str, installer: Callable[[str, str], None] | None = None,
                   outcomes: Path | None = None, families: Sequence[str] = ()) -> Verified:
    """Install ``release`` into ``python``'s venv (``installer``, default :func:`install`), run ``pip check`` and
    ``generator verify --keep-going --force --jobs N`` (a process per core, up to four) into :func:`build_of` (``outcomes``: its table as JSON there too;
    ``families``: only theirs). Raises :class:`NewestError` when the install fails."""
    (installer or install)(python, release)
    from packaging.specifiers import SpecifierSet  # installed by now: a fresh venv has none before

    spec = declared()
    inside = SpecifierSet(spec).contains(release, prereleases=True)
    problems = pip_check(python, inside)
    build = build_of(release)
    # the tiny checkpoints are the same under every release (their pins say so): one cache for all
    env = {**os.environ, "NNCANON_BUILD": str(build),
           "NNCANON_CACHE": os.environ.get("NNCANON_CACHE") or str(BUILD / "checkpoints")}
    # one process per core, up to four (each holds a tiny model and its loads; generator/facts/jobs.py)
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    command = [python, "-m", "generator", "verify", "--keep-going", "--force", "--jobs", jobs]
    command += ["--outcomes", str(outcomes)] if outcomes is not None else []
    done = subprocess.run([*command, *families], cwd=REPO, env=env)
    return Verified(release, spec, inside, build, problems, done.returncode == 0)


def kept_before(release: str | None = None) -> Path | None:
    """The newest kept record, or with ``release`` the newest not newer than it (its own, once kept)."""
    from packaging.version import Version

    from generator.facts import release_record

    kept = sorted(release_record.RECORDS.glob("transformers-*.json"),
                  key=lambda p: Version(p.stem.removeprefix("transformers-")))
    if release is not None:
        kept = [p for p in kept if Version(p.stem.removeprefix("transformers-")) <= Version(release)] or kept[:1]
    return kept[-1] if kept else None


def moved(facts_dir: Path, release: str | None = None, families: Iterable[str] | None = None,
          ) -> tuple[list[str], Path | None]:
    """What the facts of ``facts_dir`` say differently from the newest kept record not newer than ``release``
    (:func:`kept_before`), and that record. ``families``: only theirs, on both sides (the families a run verified:
    those it failed or left out are in its table, not news here)."""
    from generator.facts import release_record

    against = kept_before(release)
    if against is None:
        return [], None
    made, kept = release_record.record(facts_dir, families), release_record.read_record(against)
    if families is not None:
        kept["families"] = {name: kept["families"][name] for name in families if name in kept["families"]}
    return release_record.differences(kept, made), against


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generator.facts.newest", description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the venv's python to install into and verify with")
    parser.add_argument("--release", help="this release instead of the newest published (a test, a bisection)")
    args = parser.parse_args(argv)
    try:
        release = args.release or newest_published(args.python)
        run = verify_release(args.python, release)
    except NewestError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    inside = run.inside
    print(f"transformers {release}, the newest published, is {'inside' if inside else 'outside'} the declared "
          f"{run.spec}")
    failures = [f"pip check: {line}" for line in run.pip_problems]
    if not run.verified:
        failures.append("generator verify: a family failed (the table above)")
    NEWEST_FILE.parent.mkdir(exist_ok=True)
    NEWEST_FILE.write_text(release + "\n", encoding="utf-8")
    from generator.facts.release_record import ReleaseRecordError

    try:
        changes, against = moved(run.build / "facts", release)
    except ReleaseRecordError as error:  # no facts at all (every family failed), or a damaged kept record
        changes, against = [], None
        failures.append(str(error))
    shown = against.relative_to(REPO) if against else "no kept record"
    print(f"against {shown}: " + ("nothing moved" if not changes else f"{len(changes)} moved:"))
    for line in changes:
        print(f"  {line}")
    if changes and against is not None and against.stem == f"transformers-{release}":
        failures.append(f"{shown} no longer says what the facts say: write it again (make releases)")
    for line in failures:
        print(f"{'error' if inside else 'outside the declared range, not failing'}: {line}", file=sys.stderr)
    return 1 if failures and inside else 0


if __name__ == "__main__":
    sys.exit(main())
