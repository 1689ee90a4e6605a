"""``make release-watch``: the whole cycle for a new transformers release, ending in candidate records and a report.

``python -m generator.facts.watch --python VENV/bin/python [--release X]`` takes release X, or the newest on pip's
index, and does what ``make verify-newest`` does (:func:`generator.facts.newest.verify_release`: installed into the
venv with its own dependencies, ``pip check``, every family verified with ``generator verify --keep-going --force``,
whose ``--outcomes`` file gives each family's result), then writes into ``build/release-watch/<release>/``:

- ``transformers-<release>.json``: the candidate record, the families that verified (a failed family's older facts
  file is left out), in the shape of ``releases/``'s records;
- ``REPORT.md`` (:mod:`generator.facts.watch_report`): each family's result with its error in one line, what moved
  against the newest kept record not newer than the release, and the triage steps.

``build/release-watch/latest`` names the release watched last (``.ci/release-watch`` prints its report). The exit
status follows verify-newest's rule: a failure fails inside the declared range only; outside it the report is the
news. ``python -m generator.facts.watch --accept X`` (``make release-accept RELEASE=X``) keeps X's candidate as
``releases/transformers-X.json`` and writes ``nncanon/verified_releases.json`` again: what ``generator releases
--check`` and ``support()`` read. It refuses a candidate that leaves out a family the kept record of X lists, unless
``--drop`` says that family is dropped from X on purpose.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from generator.facts import newest, release_record
from generator.facts.watch_report import Watched, read_outcomes, report, verified_families

WATCH = newest.BUILD / "release-watch"


class AcceptError(RuntimeError):
    """A candidate that cannot be accepted as it is: one line naming it and the fix."""


def watch_dir(release: str) -> Path:
    return WATCH / release


def candidate_path(release: str) -> Path:
    return watch_dir(release) / release_record.record_path(release).name


def watch(python: str, release: str | None = None, installer: Callable[[str, str], None] | None = None,
          families: Sequence[str] = ()) -> Watched:
    """One cycle for ``release`` (default: the newest published), its candidate record and REPORT.md written.
    ``installer``: how the release is put into ``python``'s venv (default :func:`generator.facts.newest.install`);
    ``families``: only theirs (a triage's second look; the default, every family, is what a candidate needs)."""
    release = release or newest.newest_published(python)
    here = watch_dir(release)
    here.mkdir(parents=True, exist_ok=True)
    outcomes_file = here / "outcomes.json"
    outcomes_file.unlink(missing_ok=True)  # a run that dies before writing it must not report the last one's
    candidate_path(release).unlink(missing_ok=True)
    command = f"make release-watch RELEASE={release}" + (f" FAMILIES=\"{' '.join(families)}\"" if families else "")
    watched = Watched(release, newest.declared(), command=command)
    try:
        run = newest.verify_release(python, release, installer, outcomes=outcomes_file, families=families)
    except newest.NewestError as error:
        watched.error = str(error)
    else:
        watched.inside, watched.pip_problems = run.inside, run.pip_problems
        _records(watched, run.build / "facts", outcomes_file)
    (here / "REPORT.md").write_text(report(watched), encoding="utf-8")
    (WATCH / "latest").write_text(release + "\n", encoding="utf-8")
    return watched


def _records(watched: Watched, facts: Path, outcomes_file: Path) -> None:
    """The candidate record of the families that verified, and what moved against the kept one."""
    try:
        if not outcomes_file.exists():
            raise release_record.ReleaseRecordError("generator verify wrote no outcomes: it stopped before its table "
                                                    "(its output above says why)")
        watched.outcomes = read_outcomes(outcomes_file)
        verified = verified_families(watched.outcomes)
        if not verified:
            raise release_record.ReleaseRecordError("no family verified: no candidate record")
        made = release_record.record(facts, verified)
        if made["transformers"] != watched.release:
            raise release_record.ReleaseRecordError(f"{facts}: the facts are of transformers {made['transformers']}, "
                                                    f"not {watched.release}: the venv has another release installed")
        watched.candidate = release_record.write_record(candidate_path(watched.release), made)
        watched.changes, watched.against = newest.moved(facts, watched.release, verified)
    except release_record.ReleaseRecordError as error:
        watched.record_error = str(error)


def accept(release: str, drop: Sequence[str] = ()) -> tuple[Path, list[str]]:
    """Keep ``release``'s candidate in ``releases/`` (and the library's list); returns the record and the families it
    adds to the kept record of that release (every one, for a release not kept yet)."""
    candidate = candidate_path(release)
    if not candidate.exists():
        raise AcceptError(f"{release_record.shown_path(candidate)} is missing: watch the release first "
                          f"(make release-watch RELEASE={release})")
    made = release_record.read_record(candidate)
    kept_path = release_record.record_path(release)
    kept = release_record.read_record(kept_path)["families"] if kept_path.exists() else {}
    lost = sorted(set(kept) - set(made["families"]) - set(drop))
    if lost:
        raise AcceptError(f"{release_record.shown_path(candidate)} leaves out {', '.join(lost)}, which "
                          f"{release_record.shown_path(kept_path)} lists: triage them (REPORT.md beside it) and watch "
                          f"again, or drop them from {release} on purpose: --drop {' '.join(lost)}")
    return release_record.keep(made), sorted(set(made["families"]) - set(kept))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generator.facts.watch", description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="the venv's python to install into and verify with")
    parser.add_argument("--release", help="this release instead of the newest published")
    parser.add_argument("--accept", metavar="RELEASE", help="keep RELEASE's candidate record in releases/")
    parser.add_argument("--drop", nargs="*", default=[], metavar="FAMILY",
                        help="with --accept: families the kept record lists that the candidate may leave out")
    parser.add_argument("families", nargs="*", metavar="FAMILY", help="only these families (default: every one)")
    args = parser.parse_args(argv)
    if args.accept is not None:
        try:
            path, added = accept(args.accept, args.drop)
        except (AcceptError, release_record.ReleaseRecordError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"kept {release_record.shown_path(path)}" + (f" (new: {', '.join(added)})" if added else "")
              + f" and wrote {release_record.shown_path(release_record.LIBRARY_RECORD)}: commit both")
        return 0
    if args.python is None:
        parser.error("--python is needed to watch a release (or --accept RELEASE)")
    try:
        watched = watch(args.python, args.release, families=args.families)
    except newest.NewestError as error:  # the index unreachable: no release to write a report for
        print(f"error: {error}", file=sys.stderr)
        return 1
    shown = release_record.shown_path(watch_dir(watched.release) / "REPORT.md")
    print(f"wrote {shown}" + ("" if watched.clean() else ": there is triage to do"))
    if watched.clean():
        return 0
    return 1 if watched.error is not None or watched.inside else 0


if __name__ == "__main__":
    sys.exit(main())
