"""``make release-watch``'s report: ``build/release-watch/<release>/REPORT.md``, what a maintainer reads and merges.

One markdown page per release watched (:func:`report`): the releases it ran under, ``pip check``'s word, each
family's result with its error in one line (from ``generator verify --outcomes``, :func:`read_outcomes`), what
moved against the newest kept record, the candidate record written, and the triage steps: what is left to do by
hand for a release is the families it breaks. It only renders what :mod:`generator.facts.watch` measured.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from generator.facts import release_record

#: ``generator verify --outcomes FILE``'s shape (generator/__main__.py writes it)
OUTCOMES = {"transformers": str, "torch": str, "nnsight": str,
            "families": [{"family": str, "result": str, "error": str}]}
#: the results that put a family in the candidate record: collected now, or facts current under this release
VERIFIED = ("verified", "cached")
#: how many moved values or relations a family's line lists before "and N more"
SHOWN = 12


def read_outcomes(path: Path) -> dict:
    """``verify --outcomes``'s file, checked (a run killed before writing it leaves none: that is an error too)."""
    return release_record.read_json(path, OUTCOMES, "run the watch again (make release-watch RELEASE=...)")


def verified_families(outcomes: dict) -> list[str]:
    return [row["family"] for row in outcomes["families"] if row["result"] in VERIFIED]


@dataclass
class Watched:
    """What one watch measured; ``error``: the step that stopped it (an install pip refused), nothing after it ran."""
    release: str
    spec: str
    inside: bool | None = None
    command: str = ""
    outcomes: dict | None = None
    pip_problems: list[str] = field(default_factory=list)
    candidate: Path | None = None
    against: Path | None = None
    changes: list[str] = field(default_factory=list)
    error: str | None = None
    record_error: str | None = None

    def failed(self) -> list[dict]:
        return [row for row in (self.outcomes or {}).get("families", []) if row["result"] == "failed"]

    def clean(self) -> bool:
        """Nothing to triage: installed, pip check quiet, no family failed, the candidate written."""
        return (self.error is None and self.record_error is None and not self.pip_problems and not self.failed()
                and self.candidate is not None)


def _kept(path: Path | None) -> str:
    return "no kept record" if path is None else release_record.shown_path(path)


def _cell(text: str, most: int = 300) -> str:
    """``text`` for a table cell or a list item: one line, its pipes escaped, cut at ``most`` characters."""
    text = text.replace("\n", " ")
    return (text if len(text) <= most else text[:most - 3] + "...").replace("|", "\\|")


def moved_by_family(changes: list[str]) -> dict[str, list[str]]:
    """``differences()``'s lines grouped by family (each line starts with the family's name)."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for line in changes:
        family, _, rest = line.partition(" ")
        grouped[family].append(rest)
    return dict(grouped)


def report(watched: Watched) -> str:
    """REPORT.md for ``watched``."""
    w = watched
    lines = [f"# transformers {w.release}: release watch", ""]
    if w.inside is not None:
        lines += [f"transformers {w.release} is **{'inside' if w.inside else 'outside'}** the declared range "
                  f"`{w.spec}` (pyproject).", ""]
    if w.error is not None:
        return "\n".join(lines + ["## Stopped", "", f"The watch stopped before verifying: {w.error}", "",
                                  *_triage(w)]) + "\n"
    out = w.outcomes or {"families": []}
    rows = out["families"]
    counts = {result: sum(r["result"] == result for r in rows) for result in dict.fromkeys(r["result"] for r in rows)}
    lines += [f"Verified under transformers {out.get('transformers', '?')}, torch {out.get('torch', '?')}, "
              f"nnsight {out.get('nnsight', '?')}" + (f" (`{w.command}`)" if w.command else "") + ".", "",
              "## Summary", "",
              f"- families: {len(rows)} ({', '.join(f'{n} {result}' for result, n in counts.items()) or 'none'})",
              "- failed: " + (", ".join(r["family"] for r in w.failed()) or "none"),
              "- pip check: " + ("; ".join(w.pip_problems) if w.pip_problems else "no broken requirements"),
              f"- against {_kept(w.against)}: " + (w.record_error if w.record_error else "nothing moved"
                                                    if not w.changes else f"{len(w.changes)} moved "
                                                    f"({len(moved_by_family(w.changes))} families)"),
              "- candidate record: " + (f"`{release_record.shown_path(w.candidate)}`" if w.candidate
                                        else "none written"),
              "", "## Families", "", "| family | result | seconds | error, or why it was left out |",
              "|---|---|---|---|"]
    for row in rows:
        seconds = "-" if row.get("seconds") is None else f"{row['seconds']:.1f}"
        lines.append(f"| {row['family']} | {row['result']} | {seconds} | {_cell(row['error'])} |")
    lines += ["", f"## What moved against {_kept(w.against)}", ""]
    if not w.changes:
        lines.append("Nothing moved: every family verified says what the kept record says." if w.against
                     else "No kept record to compare with.")
    for family, items in moved_by_family(w.changes).items():
        more = f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
        lines.append(f"- **{family}** ({len(items)}): " + "; ".join(f"`{i}`" for i in items[:SHOWN]) + more)
    return "\n".join(lines + ["", *_triage(w)]) + "\n"


def _triage(w: Watched) -> list[str]:
    """The hand work left: the failed families (each with its error and the command that reproduces it alone), then
    accepting the candidate and, where it is news, the range."""
    venv = ".venv-transformers-newest/bin/python"
    watch_again = f"`make release-watch RELEASE={w.release}`"
    if w.error is not None:
        return _numbered([f"Reproduce the install: `{venv} -m pip install transformers=={w.release}` beside nncanon's "
                          "other requirements; a new hard dependency or a raised minimum goes into pyproject's "
                          "dependencies if nncanon needs it, else into constraints.txt.",
                          f"Watch again: {watch_again}."])
    steps, failed = [], w.failed()
    if failed:
        where = ("inside the declared range: each is a regression, and the watch failed" if w.inside else
                 "outside the declared range: they fail nothing, and are what stands between the range and this "
                 "release (fix them to widen it, or say in pyproject's comment which families cannot)")
        each = [f"    - **{row['family']}**: {_cell(row['error'])}  \n      `NNCANON_BUILD=build/transformers-"
                f"{w.release} {venv} -m generator verify --force {row['family']}`" for row in failed]
        families = f"{len(failed)} failed famil{'y' if len(failed) == 1 else 'ies'}"
        steps.append(f"Triage the {families}, {where}. Reproduce each alone (the command under it). Where the "
                     "release moved a read point or a layout, give the family per-release locators chosen by the "
                     "installed release and its YAML's `claims.releases` (docs_src/contributing.md, \"Add a "
                     "family\", step 4); where it cannot hold, narrow the YAML's `releases` with a comment saying "
                     "why.\n" + "\n".join(each))
    if w.record_error is not None:
        steps.append(f"No candidate or comparison could be made: {_cell(w.record_error)}. Fix that and watch again.")
    if w.pip_problems:
        steps.append("`pip check` complains: a requirement pyproject or constraints.txt states is wrong for this "
                     "release; fix it there.")
    if w.changes:
        steps.append("Read what moved above: each is a value read elsewhere or a relation's error that changed; the "
                     "Releases page will show it. A move that is a bug is fixed like a failure.")
    if failed or w.pip_problems:
        names = " ".join(row["family"] for row in failed)
        steps.append(f"After each fix, watch the failed families again (`make release-watch RELEASE={w.release}"
                     + (f' FAMILIES="{names}"`' if names else "`") + f"), then every family ({watch_again}): a "
                     "candidate holds the families its run verified.")
    if w.candidate is not None:
        steps.append(f"Accept the candidate: `make release-accept RELEASE={w.release}` copies it to "
                     f"`releases/transformers-{w.release}.json` and writes `nncanon/verified_releases.json` again "
                     "(what `generator releases --check` and `support()` read); commit both.")
    if w.inside is False and w.clean():
        steps.append(f"Every family verified outside the range: widen transformers to include {w.release} in "
                     "pyproject, `nncanon/guards/releases.py` RANGES, README and tests/test_release_range.py.")
    return _numbered(steps)


def _numbered(steps: list[str]) -> list[str]:
    return ["## Triage", "", *(f"{n}. {step}" for n, step in enumerate(steps, 1))]
