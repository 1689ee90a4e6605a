"""How a failure reads in a survey row: one line, the same on every run."""

from __future__ import annotations

import re


def one_line(error: BaseException) -> str:
    """``Type: first line`` of an exception; a message that ends at a colon continues on its next line (a
    config validator's names the check, then says what failed). Addresses are dropped: they differ per run."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    text = re.sub(r" at 0x[0-9a-f]+", "", text)
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__
