"""The check every bad-input test makes of the command line: it ended in exactly one ``error:`` line."""

from __future__ import annotations

from generator.__main__ import main


def cli_error(capsys, argv: list[str]) -> str:
    """Run the CLI in-process; assert it ended in exactly one ``error:`` line and no traceback, and return it."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: ") and err.count("\n") == 1, err
    return err
