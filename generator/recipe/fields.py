"""The family YAML's error and the checks every section of it is validated with.

Every problem is one `FamilyYamlError` naming the file and the dotted field; the sections
(``family``, ``family_sections``) and every stage that reads a family file raise it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


class FamilyYamlError(ValueError):
    """A family YAML is malformed. ``file`` and ``field`` (dotted) say where."""

    def __init__(self, file: str | Path, field: str | None, message: str, *, line: int | None = None):
        self.file = _display(file)
        self.field = field
        self.message = message
        self.line = line
        where = f"{self.file}: field '{field}'" if field else self.file
        if line:
            where += f": line {line}"
        super().__init__(f"{where}: {message}")


def _display(path: str | Path) -> str:
    """The path relative to the repository when it lies inside it, else as given (a symlink's own name,
    not its target's: the user knows the file by the name they gave)."""
    p = Path(path)
    try:
        return str(Path(os.path.abspath(p)).relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error message stays one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_name(expected: type | tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        bool: "a boolean (true/false)",
        list: "a list",
        dict: "a mapping",
        float: "a number",
    }
    if isinstance(expected, tuple):
        return " or ".join(names.get(t, t.__name__) for t in expected)
    return names.get(expected, expected.__name__)


def _check_type(file: Path, dotted: str, value: Any, expected: type | tuple[type, ...]) -> Any:
    types = expected if isinstance(expected, tuple) else (expected,)
    ok = isinstance(value, types)
    # bool is an int in Python; YAML's true is not an integer here.
    if ok and isinstance(value, bool) and bool not in types:
        ok = False
    if dict in types and isinstance(value, Mapping):
        ok = True
    if not ok:
        raise FamilyYamlError(file, dotted, f"expected {_type_name(expected)}, got {_short(value)}")
    return value


def _require(file: Path, mapping: Mapping, prefix: str, names: tuple[str, ...]) -> None:
    for name in names:
        if name not in mapping:
            raise FamilyYamlError(file, f"{prefix}{name}", "missing (required)")


def _no_unknown(file: Path, mapping: Mapping, prefix: str, allowed: tuple[str, ...]) -> None:
    unknown = [k for k in mapping if k not in allowed]
    if unknown:
        raise FamilyYamlError(
            file,
            f"{prefix}{unknown[0]}",
            f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(repr(str(k)) for k in unknown)}"
            f" (allowed: {', '.join(allowed)})",
        )


def _plain(file: Path, value: Any, dotted: str) -> None:
    """Only strings, numbers, booleans, null, lists and mappings (a YAML date or set is refused)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise FamilyYamlError(file, dotted or None, f"key {_short(key)} is not a plain value")
            _plain(file, item, f"{dotted}.{key}" if dotted else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _plain(file, item, f"{dotted}[{i}]")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:  # "\ud800" in a quoted string: no file (facts, pages) can store it
            raise FamilyYamlError(file, dotted, f"holds a lone surrogate {value[e.start]!r} at character {e.start}, "
                                                f"which UTF-8 cannot store; write the character itself") from None
    elif not isinstance(value, (str, int, float, bool)) and value is not None:
        raise FamilyYamlError(
            file, dotted, f"{_short(value)} is a YAML {type(value).__name__}, not plain data; quote it"
        )


def _string_list(file: Path, dotted: str, value: Any) -> tuple[str, ...]:
    _check_type(file, dotted, value, list)
    for i, item in enumerate(value):
        _check_type(file, f"{dotted}[{i}]", item, str)
    return tuple(value)
