"""The time limit a note runs under, so a note that never ends fails the build instead of hanging it.

``$NNCANON_NOTE_TIMEOUT`` seconds (default :data:`DEFAULT_NOTE_TIMEOUT`; 0: no limit) per note.
When they are up, SIGALRM raises :class:`NoteTimeout` in the note's code, again every second should
the code catch it; the runner reports it as the note's failure. Python runs a signal handler only
between two bytecodes, so a single long call in C (``sum(range(10**12))``, ``9**9**9``) cannot be
interrupted: if the code has not returned to Python :func:`grace` seconds after the limit, a
watchdog process (one per build, started on the first note) prints one ``error:`` line naming the
note and ends the build with SIGTERM. A hung build is worse than a stopped one.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: seconds a note's expressions and code may take, unless $NNCANON_NOTE_TIMEOUT says otherwise
DEFAULT_NOTE_TIMEOUT = 120.0
TIMEOUT_ENV = "NNCANON_NOTE_TIMEOUT"


class NoteTimeout(BaseException):
    """Raised in the note's code when its time is up (a BaseException: a note's ``except Exception``
    does not swallow it)."""


def note_timeout() -> float:
    """The time limit of one note in seconds, from ``$NNCANON_NOTE_TIMEOUT`` (0: none)."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_NOTE_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"{TIMEOUT_ENV}={text!r}: expected seconds, a number 0 or more (0: no limit)")
    return seconds


def grace(seconds: float) -> float:
    """How long past the limit the watchdog waits for the code to return to Python."""
    return min(30.0, max(2.0, seconds / 4))


class Clock:
    """A running time limit: ``expired`` once :class:`NoteTimeout` was raised."""

    def __init__(self, seconds: float):
        self.seconds, self.expired = seconds, False


#: the watchdog: a small process (it needs no GIL) that ends the build when a deadline passes
_WATCHDOG = r"""
import os, select, signal, sys, time
parent, deadline, message, buffer = int(sys.argv[1]), None, "", b""
while True:
    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
    if not select.select([0], [], [], wait)[0]:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
        if os.getppid() == parent:
            os.kill(parent, signal.SIGTERM)
            time.sleep(2)
            if os.getppid() == parent:
                os.kill(parent, signal.SIGKILL)
        sys.exit(0)
    chunk = os.read(0, 65536)
    if not chunk:
        sys.exit(0)  # the build ended
    *lines, buffer = (buffer + chunk).split(b"\n")
    for line in lines:
        if line.startswith(b"arm "):
            seconds, _, text = line[4:].partition(b" ")
            deadline, message = time.monotonic() + float(seconds), text.decode("utf-8", "replace")
        else:
            deadline = None
"""
_watchdog: subprocess.Popen | None = None


def _tell_watchdog(line: str) -> None:
    """Send one command to the watchdog, starting it (once per process) when needed."""
    global _watchdog
    for _ in range(2):
        if _watchdog is None or _watchdog.poll() is not None:
            _watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
            )
            atexit.register(_close, _watchdog)
        try:
            _watchdog.stdin.write(line.replace("\n", " ").encode() + b"\n")
            _watchdog.stdin.flush()
            return
        except (BrokenPipeError, OSError):
            _watchdog = None


def _close(process: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):
        process.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[Clock]:
    """Raise :class:`NoteTimeout` in the block after ``seconds``; ``what`` names the note in the
    watchdog's last word. SIGALRM: the main thread on POSIX only; elsewhere, no limit."""
    clock = Clock(seconds)
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield clock
        return

    def expire(signum: int, frame: Any) -> None:
        clock.expired = True
        raise NoteTimeout(seconds)

    late = grace(seconds)
    _tell_watchdog(
        f"arm {seconds + late} error: {what}: still running {late:g} s after its time limit of {seconds:g} s "
        f"({TIMEOUT_ENV}), in a call that does not return to Python; stopping the build"
    )
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield clock
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _tell_watchdog("disarm")
