"""One process at a time computes rows of the machine's shared caches (``$NNCANON_CACHE/survey``,
``$NNCANON_CACHE/transformer_lens``): a second process that needs the same rows waits for the first and then
reads what it wrote, instead of computing them again beside it (a whole survey is ~50 CPU-s; two builds in two
build directories, or two test workers, would otherwise each pay it on a cold machine).

The lock is an ``flock`` on ``<directory>/.lock``: the kernel drops it when its holder exits, killed or not. It
is always taken last (inside a build's own lock, never around one), so two processes cannot wait on each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def computing(directory: Path) -> Iterator[None]:
    """Hold ``directory``'s lock; re-read the cache inside it, as another process may have just filled it."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the file drops its flock
