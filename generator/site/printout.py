"""``print(model)`` of a full-size checkpoint, line by line, with the standard path each line names.

The family page wraps each line in a span carrying its path (``data-path``), so the diagrams and
the support table can point at the lines (generator/site/diagrams.py :class:`Links`).
"""

from __future__ import annotations

import re

_PRINT_LINE = re.compile(r"^(\s*)\(([^)]+)\)(:| ->)(.*)$")


def printout_lines(text: str) -> list[dict]:
    """Each line of print(model), with the standard path of the module or value it names.

    Indices of a ModuleList (``(0-2): 3 x ...``) become ``[i]`` so a line's path is the support
    table's host path (``model.layers[i].mlp``); the indices it covers are kept in ``layers``.
    """
    rows, stack = [], []
    for n, line in enumerate(text.splitlines()):
        indent = len(line) - len(line.lstrip(" "))
        row = {"text": line, "path": None, "kind": None, "layers": None, "same": None, "repeat": False}
        m = _PRINT_LINE.match(line)
        if n == 0 and not m:
            stack = [(indent, "model")]
            row.update(path="model", kind="module")
        elif m:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1] if stack else "model"
            key, sep, rest = m.group(2), m.group(3), m.group(4)
            if re.fullmatch(r"\d+(-\d+)?", key):
                path = f"{parent}[i]"
                row["layers"] = key
            else:
                path = f"{parent}.{key.split('/')[0]}"
            is_value = sep == " ->" or rest.lstrip().startswith("[")
            row.update(path=path, kind="value" if is_value else "module")
            if not is_value and rest.rstrip().endswith("("):
                stack.append((indent, path))
        rows.append(row)
    _mark_repeats(rows)
    return rows


def _mark_repeats(rows: list[dict]) -> None:
    """Mark each ModuleList entry whose lines repeat an earlier entry's under the same list (a hybrid stack's 48
    blocks are 2 kinds): its first line gets ``same`` (the earlier entry's index), the rest ``repeat``, so print
    leaves them out (36 A4 pages of qwen3_next's printout become 2) while the screen shows every line."""
    seen: dict[tuple, str] = {}
    n = 0
    while n < len(rows):
        row = rows[n]
        if not row["layers"] or not row["text"].rstrip().endswith("("):
            n += 1
            continue
        indent = len(row["text"]) - len(row["text"].lstrip(" "))
        end = n + 1
        while end < len(rows) and len(rows[end]["text"]) - len(rows[end]["text"].lstrip(" ")) > indent:
            end += 1
        end += 1  # the entry's closing ")"
        body = tuple(r["text"] for r in rows[n + 1:end])
        key = (row["path"], _PRINT_LINE.sub(r"\1\4", row["text"]), body)
        if key in seen:
            row["same"] = seen[key]
            for r in rows[n + 1:end]:
                r["repeat"] = True
        else:
            seen[key] = row["layers"]
        n = end
