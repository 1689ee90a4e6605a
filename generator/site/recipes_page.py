"""The Recipes page: docs_src/recipes.md with, under each recipe, the families it ran on at build and, for each
family it cannot serve, nncanon's reason in one line (generator/notes/recipe_runs.py's results, read, not run)."""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

_SECTION = re.compile(r"^## (.+)$", re.M)


def reason_line(reason: str) -> str:
    """A refusal's first clause: what the family lacks or why, without the listing that follows it."""
    short = reason.split("; ")[0].split(" (print(model.support())")[0]
    return short if len(short) <= 200 else short[:197].rstrip() + "..."


def served_lines(title: str, runs: dict[str, dict]) -> list[str]:
    """The lines under one recipe: where it ran, and each family it cannot serve with its reason."""
    served = sorted(family for family, run in runs.items() if title in run["served"])
    refused = sorted((family, run["refused"][title]) for family, run in runs.items() if title in run["refused"])
    # out of the search index (data-search-exclude): a family's name is found on its own page, and 129 names under
    # each recipe were the index's largest growth
    links = ", ".join(f'<a href="../families/{escape(f)}/">{escape(f)}</a>' for f in served)
    lines = [f'<p class="nc-ran" data-search-exclude><strong>Ran on {len(served)} of {len(runs)} families at '
             f"build</strong>{': ' + links if served else ''}.</p>"]
    if refused:  # folded: under a recipe most families serve, the list would bury the next recipe
        lines += ["", f'<details class="nc-refused" data-search-exclude><summary>It cannot serve {len(refused)}, '
                      f"each in nncanon's words</summary><ul>"]
        lines += [f"<li><code>{escape(family)}</code>: {escape(reason_line(reason))}</li>" for family, reason in refused]
        lines += ["</ul></details>"]
    return lines


def recipes_page(text: str, runs: dict[str, dict]) -> str:
    """``text`` (the page's source) with each recipe's families placed at the end of its section."""
    if not runs:
        return text
    starts = [(m.start(), m.group(1).strip()) for m in _SECTION.finditer(text)]
    pieces, previous = [], 0
    for index, (_, title) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(text)
        pieces.append(text[previous:end].rstrip("\n"))
        pieces.append("\n\n" + "\n".join(served_lines(title, runs)) + "\n\n")
        previous = end
    pieces.append(text[previous:])
    return "".join(pieces).rstrip("\n") + "\n"


def write_recipes(path: Path, families: list[str], directory: Path | None) -> None:
    """The page at ``path`` (copied there from docs_src) with the runs kept in ``directory`` of ``families``."""
    runs = {}
    for name in families:
        run = directory / f"{name}.json" if directory is not None else None
        if run is not None and run.exists():
            runs[name] = json.loads(run.read_text(encoding="utf-8"))
    path.write_text(recipes_page(path.read_text(encoding="utf-8"), runs), encoding="utf-8")
