"""A full disk while the build writes, said as one line naming the directory and what to do.

``write()`` on a full disk raises ``[Errno 28] No space left on device`` with no file name: nothing says whether
the build directory, the checkpoint cache or the site's directory filled up, nor which setting moves it. Each
place the build writes wraps its writes in :func:`room`, naming the directory it writes into and the setting that
moves it elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

FULL = (errno.ENOSPC, errno.EDQUOT)
#: what moves each directory the build writes to another disk (the ``moved_by`` of :func:`room`)
BUILD = "set NNCANON_BUILD to a directory on another disk"
CACHE = "set NNCANON_CACHE to a directory on another disk"
SHARED = "set NNCANON_CACHE and NNCANON_BUILD to directories on another disk"


class DiskFull(OSError):
    """No room left where the build writes: names the directory and the fix (``str`` is the message alone)."""

    def __str__(self) -> str:
        return self.strerror


@contextlib.contextmanager
def room(directory: Path, moved_by: str | None = None) -> Iterator[None]:
    """Turn a full disk (or quota) met inside the block into a :class:`DiskFull` naming ``directory`` and how to
    free it or move it (``moved_by``: the setting or option that points the writes elsewhere, if any)."""
    try:
        yield
    except DiskFull:
        raise  # an inner room named the directory more closely
    except OSError as e:
        if e.errno not in FULL:
            raise
        file = f" ({e.filename})" if e.filename else ""
        elsewhere = f", or {moved_by}," if moved_by else ""
        raise DiskFull(e.errno, f"{directory}: the disk holding it is full ({os.strerror(e.errno)}){file}; free "
                                f"space there{elsewhere} and run the command again") from None
