"""``python -m generator <command> ...``: the encyclopedia's build tool.

Each subcommand is one entry of :data:`COMMANDS`: a name, a one-line help, a function that adds
its arguments to its parser, and a function that runs it with the parsed arguments and returns
the exit status. Adding a subcommand (build, verify, serve, render) is adding an entry.

An error the build raises on purpose (:func:`reported_errors`) ends the command with one
``error: ...`` line on stderr and exit status 1, no traceback; Ctrl-C with ``interrupted`` and
exit status 130. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import functools
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Command:
    help: str
    run: Callable[[argparse.Namespace], int | None]
    arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None


def _family_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "family", help="family name: the stem of a families/*.yaml file, e.g. qwen3_5_moe_text"
    )


def _checkpoint_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("families", nargs="+", metavar="family",
                        help="family name: the stem of a families/*.yaml file, e.g. qwen3_5_moe_text")
    parser.add_argument(
        "--rebuild", action="store_true", help="build again even if a cached build matches the pin"
    )
    parser.add_argument("--variants", action="store_true", help="each family's variants' checkpoints too")


def run_checkpoint(args: argparse.Namespace) -> int:
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    for name in args.families:
        family = get_family(name)
        for each in [family, *(family.variant(spec["name"]) for spec in family.variants if args.variants)]:
            print(checkpoint_dir(each, rebuild=args.rebuild))
    return 0


def run_pin(args: argparse.Namespace) -> int:
    from generator.checkpoint.checkpoints import cached_dir, pin
    from generator.facts.identity import check_identity
    from generator.recipe.family import get_family

    family = get_family(args.family)
    check_identity(family)  # a checkpoint of another model type would verify that model, not this family
    before = family.tiny["sha256"]
    sha = pin(family)
    state = "unchanged" if before == sha else f"was {before}"
    print(f"{family.family}: tiny.sha256 = {sha} ({state})")
    print(cached_dir(family))
    return 0


def _verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="collect facts again even where the cache key matches")
    parser.add_argument(
        "--lock-timeout",
        type=float,
        metavar="SECONDS",
        help="if another build is running, give up after SECONDS (default: wait for it)",
    )
    parser.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                        help="collect the families whose facts are not current in N processes at once (default 1)")


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of processes, 1 or more")
    return int(text)


def _verify_only_arguments(parser: argparse.ArgumentParser) -> None:
    _verify_arguments(parser)
    parser.add_argument("--kernels-only", action="store_true",
                        help="only the facts a CPU's kernels compute, into <build>/facts-kernels (no edits, no config "
                             "tables): to compare one CPU's with another's")
    parser.add_argument("--keep-going", action="store_true",
                        help="verify every family even when one fails, then print a table (family, result, seconds, "
                             "the error in one line); the exit status is 1 if any failed")
    parser.add_argument("--outcomes", metavar="FILE",
                        help="with --keep-going (implied): also write the table as JSON to FILE, with the transformers, "
                             "torch and nnsight releases it ran under (make release-watch reads it)")
    parser.add_argument("--dtypes", action="store_true",
                        help="also verify every relation and edit in bfloat16 and float16 (generator/facts/dtype_runs.py;"
                             " make site does it for every family)")
    parser.add_argument("families", nargs="*", metavar="FAMILY", help="only these families (default: every one)")


def _build_arguments(parser: argparse.ArgumentParser) -> None:
    _verify_arguments(parser)
    parser.add_argument("--site", help="build the site into this directory (default: site/)")


_progress = functools.partial(print, flush=True)


def run_build(args: argparse.Namespace) -> int:
    from generator.build import SITE, build

    if args.site is not None and not args.site.strip():  # Path("") is ".": say what was typed
        print(f"error: --site {args.site!r}: an empty path; name a new directory", file=sys.stderr)
        return 1
    build(site=Path(args.site) if args.site else SITE, progress=_progress, force=args.force, timeout=args.lock_timeout,
          jobs=args.jobs)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """Collect (verify every claim) without rendering; ``--keep-going``: past a failing family, then the table."""
    from generator.build import verify, verify_each

    if args.dtypes and (args.kernels_only or args.keep_going or args.outcomes is not None):
        print("error: --dtypes runs after a verify that stops at the first failure and keeps the page's facts; drop "
              "--kernels-only, --keep-going and --outcomes, or --dtypes", file=sys.stderr)
        return 1
    if not args.keep_going and args.outcomes is None:
        verify(progress=_progress, force=args.force, timeout=args.lock_timeout, names=args.families,
               kernels_only=args.kernels_only, jobs=args.jobs, dtypes=args.dtypes)
        return 0
    outcomes = verify_each(progress=_progress, force=args.force, timeout=args.lock_timeout, names=args.families,
                           kernels_only=args.kernels_only, jobs=args.jobs)
    for outcome in outcomes:  # a bug keeps its traceback, as it does without --keep-going
        if outcome.error is not None and not isinstance(outcome.error, reported_errors()):
            print(f"{outcome.family}:", file=sys.stderr)
            traceback.print_exception(outcome.error, file=sys.stderr)
    print(verify_table(outcomes))
    if args.outcomes is not None:
        write_outcomes(Path(args.outcomes), outcomes)
    return 1 if any(outcome.result == "failed" for outcome in outcomes) else 0


def one_line(error: BaseException) -> str:
    """An error in one line: a reported error's own first line, anything else's type and first line; a first line
    that ends in a colon ("2 do not hold:") goes on with the first line below it and how many more there are."""
    lines = [line.strip() for line in _message(error).splitlines() if line.strip()] or [type(error).__name__]
    text = lines[0]
    if text.endswith(":") and len(lines) > 1:
        text += f" {lines[1]}" + (f" (and {len(lines) - 2} more)" if len(lines) > 2 else "")
    return text if isinstance(error, reported_errors()) else f"{type(error).__name__}: {text}"


def verify_table(outcomes: list) -> str:
    """``verify --keep-going``'s table: family, result, seconds, the error in one line; then the count failed."""
    rows = [(o.family, o.result, "-" if o.seconds is None else f"{o.seconds:.1f}",
             one_line(o.error) if o.error is not None else o.note) for o in outcomes]
    head = ("family", "result", "seconds", "error")
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}".rstrip() for r in [head, *rows]]
    failed = [o.family for o in outcomes if o.result == "failed"]
    counts = {result: sum(o.result == result for o in outcomes) for result in dict.fromkeys(o.result for o in outcomes)}
    lines.append((f"{len(failed)} of {len(outcomes)} families failed: {', '.join(failed)}" if failed
                  else "no family failed") + f" ({', '.join(f'{n} {result}' for result, n in counts.items())})")
    return "\n".join(lines)


def write_outcomes(path: Path, outcomes: list) -> None:
    """``verify --outcomes``: each family's row as JSON (``generator.facts.watch_report.OUTCOMES``'s shape), and the
    releases it was verified under."""
    import json
    import platform

    import nnsight
    import torch
    import transformers

    rows = [{"family": o.family, "result": o.result, "seconds": o.seconds,
             "error": one_line(o.error) if o.error is not None else o.note} for o in outcomes]
    data = {"transformers": transformers.__version__, "torch": torch.__version__,
            "nnsight": getattr(nnsight, "__version__", "unknown"), "python": platform.python_version(),
            "families": rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _new_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("family", help="the new family's name (lowercase, digits, underscores)")
    parser.add_argument("--like", help="the family to start from, e.g. llama (with --from-survey: default the "
                                       "closest family the survey finds)")
    parser.add_argument("--model-type", help="the text config's model_type it serves (default: the name)")
    parser.add_argument("--from-survey", action="store_true",
                        help="write the family from the survey of its model type: the closest family's files, "
                             "pointed at the model type's classes, module paths and shrunk tiny config")


def run_new(args: argparse.Namespace) -> int:
    from generator.contribute import new_family

    if args.from_survey:
        from generator.factory import new_from_survey

        written, like = new_from_survey(args.family, args.model_type, args.like)
        print(f"started from {like}, the survey's closest family" if args.like is None else f"started from {like}")
    elif args.like is None:
        print("error: new needs --like FAMILY (the family to start from) or --from-survey", file=sys.stderr)
        return 2
    else:
        written = new_family(args.family, args.like, args.model_type)
    for path in written:
        print(f"wrote {path}")
    print(f"next: edit them, then python -m generator pin {args.family}; python -m generator claims {args.family}; "
          f"python -m generator verify {args.family}")
    return 0


def run_claims(args: argparse.Namespace) -> int:
    from generator.contribute import write_claims

    print(f"wrote claims.values into {write_claims(args.family)}: review it, then python -m generator verify "
          f"{args.family}")
    return 0


def _survey_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model_types", nargs="*", metavar="MODEL_TYPE",
                        help="only these model types (default: every causal-LM and image-text-to-text one)")
    parser.add_argument("--force", action="store_true", help="survey again even where the cache key matches")
    parser.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                        help="survey the model types whose rows are not current in N processes at once (default 1)")


def run_survey(args: argparse.Namespace) -> int:
    from generator.survey.run import survey_all

    survey_all(args.model_types or None, progress=_progress, force=args.force, jobs=args.jobs)
    return 0


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000)


def run_serve(args: argparse.Namespace) -> int:
    import errno

    from generator import build
    from generator.site.serve import site_server

    SITE = build.SITE
    if not 0 <= args.port <= 65535:
        print(f"error: --port {args.port}: a port is 0 to 65535 (0: any free one)", file=sys.stderr)
        return 1
    if not SITE.exists():
        print("error: no site/ yet; run `python -m generator build` first", file=sys.stderr)
        return 1
    if not SITE.is_dir():  # the server started and answered every request with an error, as if the site were broken
        print(f"error: {SITE} is a file, not a built site: move it away and run `python -m generator build`",
              file=sys.stderr)
        return 1
    try:
        server = site_server(SITE, args.port, quiet=False)
    except OSError as e:
        if e.errno not in (errno.EADDRINUSE, errno.EACCES):
            raise
        why = "is in use" if e.errno == errno.EADDRINUSE else "needs privileges"
        print(f"error: port {args.port} on 127.0.0.1 {why}; pass another with --port", file=sys.stderr)
        return 1
    with server:
        print(f"serving {SITE} at {server.url}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


def _releases_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="fail when the kept record differs from the facts, instead of writing it")


def run_releases(args: argparse.Namespace) -> int:
    from generator.facts import release_record
    from generator.facts.collect import facts_dir

    done = (release_record.check if args.check else release_record.write)(facts_dir())
    print(f"{'checked' if args.check else 'wrote'} {done.relative_to(release_record.REPO_ROOT)}")
    return 0


COMMANDS: dict[str, Command] = {
    "build": Command(
        help="collect facts for every family (cached), render the pages and build site/ with mkdocs --strict",
        run=run_build,
        arguments=_build_arguments,
    ),
    "verify": Command(
        help="collect facts for every family, checking every claim, without rendering",
        run=run_verify,
        arguments=_verify_only_arguments,
    ),
    "new": Command(
        help="start a family from another: writes its module, YAML and notes, renamed, unpinned and unclaimed",
        run=run_new,
        arguments=_new_arguments,
    ),
    "claims": Command(
        help="write the family YAML's claims.values (every host kind and value, layout, read at) from the code",
        run=run_claims,
        arguments=_family_argument,
    ),
    "survey": Command(
        help="build every transformers causal-LM and image-text-to-text model type tiny and measure which standard "
             "values and relations hold on it (cached): the Coverage page's rows",
        run=run_survey,
        arguments=_survey_arguments,
    ),
    "serve": Command(
        help="serve site/ on 127.0.0.1",
        run=run_serve,
        arguments=_serve_arguments,
    ),
    "checkpoint": Command(
        help="build each family's tiny checkpoint if needed (checking its pin) and print its directory",
        run=run_checkpoint,
        arguments=_checkpoint_arguments,
    ),
    "releases": Command(
        help="write releases/transformers-<release>.json from the facts of $NNCANON_BUILD (or --check it)",
        run=run_releases,
        arguments=_releases_arguments,
    ),
    "pin": Command(
        help="rebuild the tiny checkpoint and write its weights' sha256 into the family YAML (tiny.sha256)",
        run=run_pin,
        arguments=_family_argument,
    ),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m generator", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.arguments(sub.add_parser(name, help=command.help, description=command.help))
    return p


def reported_errors() -> tuple[type[BaseException], ...]:
    """Every error the build raises on purpose: the one list of what ends a command with ``error: ...``.

    A family YAML that does not validate (FamilyYamlError, also for a tiny.config that transformers
    rejects), a checkpoint that does not match its pin, a claim, a note or a tag that does not hold,
    facts the renderer cannot read, a failed strict mkdocs build or an unsafe URL on a page,
    another build holding the lock, a --site or build directory the build did not make, and the file system's errors (permission denied, disk full).
    """
    from generator.build import BuildBusy
    from generator.checkpoint.checkpoints import PinMismatch
    from generator.facts.collect import ClaimError
    from generator.facts.release_record import ReleaseRecordError
    from generator.notes.docs_run import DocsError
    from generator.notes.examples import NoteError
    from generator.ownership import NotOurDirectory
    from generator.recipe.fields import FamilyYamlError
    from generator.site.render import FactsError, MkdocsBuildError
    from generator.site.safe_urls import UnsafeUrlError
    from generator.survey.run import UnknownModelType

    return (
        FamilyYamlError,
        PinMismatch,
        ClaimError,
        NoteError,
        DocsError,
        FactsError,
        MkdocsBuildError,
        UnsafeUrlError,
        ReleaseRecordError,
        BuildBusy,
        NotOurDirectory,
        UnknownModelType,
        OSError,
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if not isinstance(e, reported_errors()):
            raise
        print(f"error: {_message(e)}", file=sys.stderr)
        return 1


def _message(e: BaseException) -> str:
    """The error's own text (its detail lines indented under it); the type where the text alone is unclear."""
    from generator.disk import FULL, DiskFull

    if isinstance(e, OSError) and e.errno in FULL and not isinstance(e, DiskFull):
        return _full(e)
    text = str(e).strip() or type(e).__name__
    if isinstance(e, OSError) and not e.filename and e.strerror is None:
        text = f"{type(e).__name__}: {text}"
    first, *rest = text.splitlines()
    return "\n".join([first, *(f"  {line}" if line and not line.startswith(" ") else line for line in rest)])


def _full(e: OSError) -> str:
    """A full disk met where no :func:`generator.disk.room` named the directory: name every one the commands write."""
    import os

    from generator.checkpoint.checkpoints import cache_root
    from generator.facts.collect import build_dir

    where = f" writing {e.filename}" if e.filename else ""
    return (f"the disk is full ({os.strerror(e.errno)}){where}: free space on the disk of the build directory "
            f"{build_dir()} (NNCANON_BUILD), the checkpoint cache {cache_root()} (NNCANON_CACHE) or the site (--site), "
            "or point those at another disk, and run the command again")


if __name__ == "__main__":
    sys.exit(main())
