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
        row = {"text": line, "path": None, "kind": None, "layers": None}
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
    return rows
