"""``python -m generator <command> ...``: the encyclopedia's build tool.

Each subcommand is one entry of :data:`COMMANDS`: a name, a one-line help, a function that adds
its arguments to its parser, and a function that runs it with the parsed arguments and returns
the exit status. Adding a subcommand (build, verify, serve, render) is adding an entry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass


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
    _family_argument(parser)
    parser.add_argument(
        "--rebuild", action="store_true", help="build again even if a cached build matches the pin"
    )


def run_checkpoint(args: argparse.Namespace) -> int:
    from generator.checkpoints import checkpoint_dir

    print(checkpoint_dir(args.family, rebuild=args.rebuild))
    return 0


def run_pin(args: argparse.Namespace) -> int:
    from generator.checkpoints import cached_dir, pin
    from generator.family import get_family

    family = get_family(args.family)
    before = family.tiny["sha256"]
    sha = pin(family)
    state = "unchanged" if before == sha else f"was {before}"
    print(f"{family.family}: tiny.sha256 = {sha} ({state})")
    print(cached_dir(family))
    return 0


def _build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--force", action="store_true", help="collect facts again even where the cache key matches")


def run_build(args: argparse.Namespace) -> int:
    from generator.build import build

    build(force=args.force)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """Collect (verify every claim) without rendering."""
    from generator.build import collect_all

    collect_all(force=args.force)
    return 0


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000)


def run_serve(args: argparse.Namespace) -> int:
    from generator.build import SITE
    from generator.serve import site_server

    if not SITE.exists():
        print("error: no site/ yet; run `python -m generator build` first", file=sys.stderr)
        return 1
    with site_server(SITE, args.port, quiet=False) as server:
        print(f"serving {SITE} at {server.url}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
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
        arguments=_build_arguments,
    ),
    "serve": Command(
        help="serve site/ on 127.0.0.1",
        run=run_serve,
        arguments=_serve_arguments,
    ),
    "checkpoint": Command(
        help="build the family's tiny checkpoint if needed (checking its pin) and print its directory",
        run=run_checkpoint,
        arguments=_checkpoint_arguments,
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


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from generator.checkpoints import PinMismatch
    from generator.collect import ClaimError
    from generator.family import FamilyYamlError
    from generator.render import FactsError, MkdocsBuildError

    try:
        return COMMANDS[args.command].run(args) or 0
    except (FamilyYamlError, PinMismatch, ClaimError, FactsError, MkdocsBuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
