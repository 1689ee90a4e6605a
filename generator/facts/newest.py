"""``make verify-newest``: every family verified again on the newest transformers published, and what moved.

``python -m generator.facts.newest --python VENV/bin/python`` asks pip's configured index for the newest transformers
release (no number is kept in the Makefile: a release published since is verified the day it appears), installs it
into that venv with its own dependencies (nncanon's other requirements as pyproject declares them, torch and nnsight
at the locked releases of ``constraints.txt``; nncanon itself without its dependencies, since a release outside the
declared range would contradict its own requirement), runs ``pip check``, verifies every family
(``generator verify --keep-going --force`` into ``build/transformers-<release>``) and compares the release record its
facts make with the newest kept one (``releases/``), printing "nothing moved" or every value and relation that did.

A failure (a family, ``pip check``, a record that no longer says what the facts say) fails the run when the release
is inside the range pyproject declares: nncanon says it is verified there. Outside it the failure is reported and the
run passes: that is the news a widening of the range starts from (the Releases page, docs_src/contributing.md).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: where the newest verified release is written for `make releases` (the build directory's name carries it too)
NEWEST_FILE = REPO / "build" / "newest-transformers"


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


def moved(facts_dir: Path) -> tuple[list[str], Path | None]:
    """What the facts of ``facts_dir`` say differently from the newest kept record, and that record."""
    from packaging.version import Version

    from generator.facts import release_record

    kept = sorted(release_record.RECORDS.glob("transformers-*.json"),
                  key=lambda p: Version(p.stem.removeprefix("transformers-")))
    if not kept:
        return [], None
    made = release_record.record(facts_dir)
    return release_record.differences(release_record.read_record(kept[-1]), made), kept[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generator.facts.newest", description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the venv's python to install into and verify with")
    parser.add_argument("--release", help="this release instead of the newest published (a test, a bisection)")
    args = parser.parse_args(argv)
    try:
        release = args.release or newest_published(args.python)
        install(args.python, release)
    except NewestError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    from packaging.specifiers import SpecifierSet

    spec = declared()
    inside = SpecifierSet(spec).contains(release, prereleases=True)
    print(f"transformers {release}, the newest published, is {'inside' if inside else 'outside'} the declared {spec}")
    failures = [f"pip check: {line}" for line in pip_check(args.python, inside)]
    build = REPO / "build" / f"transformers-{release}"
    env = {**os.environ, "NNCANON_BUILD": str(build), "NNCANON_CACHE": str(REPO / "build" / "checkpoints")}
    verify = subprocess.run([args.python, "-m", "generator", "verify", "--keep-going", "--force"], cwd=REPO, env=env)
    if verify.returncode != 0:
        failures.append("generator verify: a family failed (the table above)")
    NEWEST_FILE.parent.mkdir(exist_ok=True)
    NEWEST_FILE.write_text(release + "\n", encoding="utf-8")
    from generator.facts.release_record import ReleaseRecordError

    try:
        changes, against = moved(build / "facts")
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
