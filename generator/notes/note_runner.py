"""Running a note's ```` ```python ```` blocks against the tiny checkpoint, checking their claims
(``assert`` statements and ``# True`` lines): :class:`NoteRunner`.

A note's code is arbitrary Python run at build time. Each note (its expressions and its code) runs
under a time limit (generator/notes/note_clock.py), so a loop that never ends fails the build naming the
note; code that exits (``sys.exit``, ``os._exit``, which would end the build with status 0 and no
facts) fails it too. The user's Ctrl-C (a SIGINT) stops the build as ever; a KeyboardInterrupt the
code raises itself fails it naming the note, as it is not the user's.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import linecache
import os
import re
import signal
import threading
import tokenize
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.notes.expressions import ExpressionContext, render_expressions
from generator.notes.note_clock import TIMEOUT_ENV, Clock, NoteTimeout, note_timeout, time_limit
from generator.notes.notes_parse import _FENCE, Note, NoteError
from generator.recipe.family import Family
from generator.recipe.fields import _display

# ---------------------------------------------------------------------------------------------
# running a note's code


_TRUE = re.compile(r"#\s*True\b")
_CHECK = "__nncanon_true__"


class _FalseLine(Exception):
    def __init__(self, line: int, value: Any):
        super().__init__(line)
        self.line, self.value = line, value


def _check_true(value: Any, line: int) -> None:
    try:
        ok = bool(value)
    except Exception as error:  # noqa: BLE001 - a tensor of many values, say
        raise _FalseLine(line, f"not one truth value ({type(error).__name__}: {error})") from None
    if not ok:
        raise _FalseLine(line, value)


def _true_lines(source: str) -> list[int]:
    """1-based lines of ``source`` whose comment is ``# True...``."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and _TRUE.match(token.string):
            found.append(token.start[0])
    return found


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8"))


def instrument(source: str) -> tuple[str, dict[int, str]]:
    """Wrap each ``expr  # True`` statement of ``source`` in a check; keep every line where it was.

    Returns the new source and, per checked line, its original text. Raises ValueError for a
    ``# True`` on a line that does not end an expression statement.
    """
    tree = ast.parse(source)
    ends = {node.end_lineno: node for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    lines = source.split("\n")
    originals: dict[int, str] = {}
    for number in _true_lines(source):
        node = ends.get(number)
        if node is None:
            raise ValueError(number)
        originals[number] = lines[number - 1]
        end = _char_col(lines[node.end_lineno - 1], node.end_col_offset)
        lines[node.end_lineno - 1] = (
            lines[node.end_lineno - 1][:end] + f", {number})" + lines[node.end_lineno - 1][end:]
        )
        start = _char_col(lines[node.lineno - 1], node.col_offset)
        lines[node.lineno - 1] = (
            lines[node.lineno - 1][:start] + f"{_CHECK}(" + lines[node.lineno - 1][start:]
        )
    return "\n".join(lines), originals


@dataclass
class Block:
    line: int  #: the first code line's file line
    code: list[str]  #: the code lines, expressions substituted
    run: bool


def _error_line(error: BaseException, filename: str) -> int | None:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        lines = [
            frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == filename
        ]
        if lines:
            return lines[-1]
        error = error.__cause__ or error.__context__
    return None


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    lines = text.splitlines()
    if len(lines) > 6:
        text = "\n".join(lines[:6]) + "\n    ..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class NoteExit(BaseException):
    """What ``os._exit`` raises while a note runs: the build names the note instead of ending with status 0."""


@contextlib.contextmanager
def _note_guards(runner: NoteRunner):
    """``os._exit`` raises :class:`NoteExit`; a SIGINT is marked as the user's (``runner._ctrl_c``)."""
    real_exit = os._exit

    def refuse_exit(code: int = 0) -> None:
        raise NoteExit(f"os._exit({code!r})")

    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None

    def ctrl_c(signum: int, frame: Any) -> None:
        runner._ctrl_c = True
        if callable(previous):
            previous(signum, frame)
        if previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    os._exit = refuse_exit
    if main:
        signal.signal(signal.SIGINT, ctrl_c)
    try:
        yield
    finally:
        os._exit = real_exit
        if main:
            signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------------------------------------
# one note: expressions, code, markdown


class NoteRunner:
    """Renders and runs the notes of one family against its tiny checkpoint."""

    def __init__(
        self,
        family: Family,
        context: ExpressionContext,
        namespace: dict[str, Any],
        log: Callable[[str], None] | None = None,
    ):
        self.family, self.context, self.namespace, self.log = family, context, namespace, log
        self._line: int | None = None  #: the file line being rendered or run
        self._text: str | None = None  #: the line being rendered, as written
        self._clock: Clock | None = None
        self._ctrl_c = False  #: a SIGINT arrived while a note ran: a KeyboardInterrupt is the user's

    def check(self, note: Note, names: dict[str, Any], extra: dict[str, Any] | None = None) -> list[str]:
        """Render the note (its expressions) and run its code, under the time limit; its markdown lines."""
        try:
            seconds = note_timeout()
        except ValueError as error:
            raise self.error(note, None, str(error)) from None
        self._line, self._text = note.line, None
        from nncanon.core import kernels  # noqa: F401 - imported before the clock starts: torch takes seconds

        self._ctrl_c = False
        try:
            with _note_guards(self), time_limit(seconds, f"{self.family.family}: note {note.title!r} "
                                                         f"({_display(note.file)})") as clock:
                self._clock = clock
                lines, blocks = self.render(note, names)
                self.run(note, blocks, extra)
        except NoteTimeout:  # in an expression, or between two statements
            raise self.error(note, self._line, self._timed_out(), self._text) from None
        except (SystemExit, GeneratorExit) as error:
            raise self.error(note, self._line, _exits(error), self._text) from None
        finally:
            self._clock = None
        return lines

    def _timed_out(self) -> str:
        seconds = self._clock.seconds if self._clock else note_timeout()
        return (
            f"the note runs over its time limit of {seconds:g} s (an endless loop?); make it faster, "
            f"or raise the limit with {TIMEOUT_ENV}=<seconds>"
        )

    def error(
        self,
        note: Note | None,
        line: int | None,
        message: str,
        claim: str | None = None,
        file: Path | None = None,
    ) -> NoteError:
        return NoteError(
            self.family.family,
            note.title if note else None,
            file or (note.file if note else None),
            line,
            message,
            claim,
        )

    def render(self, note: Note, names: dict[str, Any]) -> tuple[list[str], list[Block]]:
        """The note's markdown lines (expressions substituted, fence flags dropped) and its code blocks."""
        out: list[str] = []
        blocks: list[Block] = []
        fence: str | None = None
        block: Block | None = None
        for number, line in note.lines:
            self._line, self._text = number, line.strip()

            def fail(column: int, claim: str, why: str, number=number) -> NoteError:
                return self.error(note, number, why, claim)

            fenced = _FENCE.match(line)
            if fence is None and fenced:
                fence = fenced.group("fence")
                words = fenced.group("info").split()
                language = words[0] if words else ""
                flags = set(words[1:])
                unknown = flags - {"display"}
                if unknown:
                    raise self.error(
                        note,
                        number,
                        f"unknown code block flag(s) {', '.join(sorted(unknown))} "
                        "(```python display: shown, not run)",
                    )
                if language == "python":
                    block = Block(number + 1, [], run="display" not in flags)
                out.append(f"{fenced.group('indent')}{fence}{language}")
                continue
            if (
                fence is not None
                and fenced
                and fenced.group("fence").startswith(fence)
                and not fenced.group("info").strip()
            ):
                fence = None
                if block is not None:
                    blocks.append(block)
                    block = None
                out.append(line)
                continue
            rendered = render_expressions(line, names, fail)
            if block is not None:
                block.code.append(rendered)
            elif fence is None and line.strip() and not rendered.strip():
                continue  # a line of silent checks only
            out.append(rendered)
        while out and not out[0].strip():
            out.pop(0)
        while out and not out[-1].strip():
            out.pop()
        markdown = "\n".join(out)
        markdown = re.sub(r"[ \t]+\n", "\n", markdown)
        return markdown.split("\n"), blocks

    def run(self, note: Note, blocks: list[Block], extra: dict[str, Any] | None = None) -> None:
        """Run the note's python blocks in order, in one namespace, checking its claims."""
        self._text = None
        runnable = [b for b in blocks if b.run]
        if not runnable:
            return
        last = max(b.line + len(b.code) for b in runnable)
        virtual = [""] * last
        for b in runnable:
            for offset, text in enumerate(b.code):
                virtual[b.line - 1 + offset] = text
        source = "\n".join(virtual) + "\n"
        try:
            source, originals = instrument(source)
        except SyntaxError as error:
            raise self.error(
                note,
                error.lineno,
                f"the code does not parse: {error.msg}",
                virtual[error.lineno - 1].strip() if error.lineno else None,
            ) from None
        except ValueError as error:
            line = error.args[0]
            raise self.error(
                note,
                line,
                "a '# True' comment on a line that does not end an expression statement",
                virtual[line - 1].strip(),
            ) from None
        digest = hashlib.sha256(f"{note.file}\0{note.title}\0{source}".encode()).hexdigest()[:12]
        filename = f"<nncanon note {self.family.family}/{note.file.name}:{note.line} {digest}>"
        # nnsight reads a trace's body back from linecache: register the code it runs
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        namespace = {**self.namespace, **(extra or {}), _CHECK: _check_true, "__name__": "__nncanon_note__"}
        tree = ast.parse(source)
        from nncanon.core import kernels

        family = getattr(self.namespace.get("model"), "family", None)
        route = kernels.route(family) if family else None
        try:
            for statement in tree.body:
                compiled = compile(
                    ast.Module([statement], []), filename, "exec", dont_inherit=True, optimize=0
                )
                try:
                    exec(compiled, namespace)
                except _FalseLine as failed:
                    text = originals.get(failed.line, virtual[failed.line - 1]).strip()
                    value = failed.value if isinstance(failed.value, str) else f"is {_short(failed.value)}"
                    raise self.error(
                        note, failed.line, f"a '# True' line does not hold: the expression {value}", text
                    ) from None
                except NoteError:
                    raise
                except AssertionError as error:
                    line = _error_line(error, filename) or statement.lineno
                    raise self.error(
                        note, line, f"an assert fails: {_describe(error)}", virtual[line - 1].strip()
                    ) from error
                except Exception as error:  # noqa: BLE001 - any failure of the code is the note's
                    line = _error_line(error, filename) or statement.lineno
                    self._line = line
                    if self._clock is not None and self._clock.expired:  # raised inside a trace, rewrapped
                        raise self.error(note, line, self._timed_out(), virtual[line - 1].strip()) from None
                    raise self.error(
                        note, line, f"the code raises {_describe(error)}", virtual[line - 1].strip()
                    ) from error
                except KeyboardInterrupt as error:
                    if self._ctrl_c:
                        raise  # the user's: stop the build
                    line = _error_line(error, filename) or statement.lineno
                    raise self.error(note, line, "the code raises KeyboardInterrupt, which would read as the user's "
                                     "Ctrl-C and stop the build: a note must not raise it",
                                     virtual[line - 1].strip()) from None
                except NoteTimeout as error:
                    line = _error_line(error, filename) or statement.lineno
                    self._line = line
                    raise self.error(note, line, self._timed_out(), virtual[line - 1].strip()) from None
                except BaseException as error:  # SystemExit, GeneratorExit: a note must not end the build
                    line = _error_line(error, filename) or statement.lineno
                    self._line = line
                    raise self.error(note, line, _exits(error), virtual[line - 1].strip()) from None
        finally:
            if family and kernels.route(family) != route:
                kernels.route_kernels(family, route)


def _exits(error: BaseException) -> str:
    what = f"calls {error}" if isinstance(error, NoteExit) else f"raises {_describe(error)}"
    return (
        f"the code {what}, which would end the build: "
        "a note must not exit (remove the exit, or assert what it checks)"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."
