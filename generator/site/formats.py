"""How a measured number or a config value reads on a page (the templates' ``show`` and ``err`` filters)."""

from __future__ import annotations

import json


def show(value) -> str:
    """A config value the way Python prints it (strings bare, as the spec's tables show them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def fmt_error(err) -> str:
    if err is None:
        return "not measured"
    if isinstance(err, str):  # a relation's: "0", or "≤ tolerance" (the digits vary by CPU)
        return "0 (exact)" if err == "0" else err
    err = float(err)
    return "0 (exact)" if err == 0 else f"{err:.1e}"
