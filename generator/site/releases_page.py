"""The Releases page and each family page's "verified on" line, from the kept release records.

A record (``releases/transformers-<release>.json``, written by ``python -m generator releases`` from one
release's facts and checked against them in CI) holds, per family, where each value is read, under which
loads it is served, and each relation's result. The page lists the releases each family was verified on
and, for each release after the first, what moved since the one before: a value read elsewhere, served
under other loads, gone or new; a relation whose result changed. Only what the records say is said.
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import Version

from generator.facts.release_record import read_record
from generator.site.escaping import escape_markdown_inline


def load_records(directory: Path) -> list[dict]:
    """The kept records, oldest release first."""
    records = [read_record(p) for p in sorted(Path(directory).glob("transformers-*.json"))]
    return sorted(records, key=lambda r: Version(r["transformers"]))


def verified_on(records: list[dict]) -> dict[str, list[str]]:
    """Each family's releases, oldest first."""
    out: dict[str, list[str]] = {}
    for kept in records:
        for family in kept["families"]:
            out.setdefault(family, []).append(kept["transformers"])
    return out


def _served(entry: dict) -> str:
    loads = entry["availability"]
    served = [load for load, ok in sorted(loads.items()) if ok]
    return ", ".join(served) if served else "no load"


def _moved(before: dict, after: dict) -> list[tuple[str, str, str]]:
    """(what, before, after) for every value and relation of one family that differs between two records."""
    rows = []
    for key in sorted(set(before["values"]) | set(after["values"])):
        a, b = before["values"].get(key), after["values"].get(key)
        host, name = key.split("::", 1)
        what = f"{host}.{name}"
        if a is None or b is None:
            rows.append((what, "absent" if a is None else f"read at {a['read_at']}",
                         "absent" if b is None else f"read at {b['read_at']}"))
            continue
        if a["read_at"] != b["read_at"]:
            rows.append((what, f"read at {a['read_at']}", f"read at {b['read_at']}"))
        if a["availability"] != b["availability"]:
            rows.append((what, f"served under {_served(a)}", f"served under {_served(b)}"))
        if a["writable"] != b["writable"]:
            rows.append((what, "writable" if a["writable"] else "read-only", "writable" if b["writable"] else "read-only"))
    for key in sorted(set(before["relations"]) | set(after["relations"])):
        a, b = before["relations"].get(key), after["relations"].get(key)
        if a != b:
            host, text = key.split("::", 1)
            result = lambda r: "absent" if r is None else ", ".join(  # noqa: E731
                f"{load}: {error}" for load, error in sorted(r["errors"].items())) or "not checked"
            rows.append((f"{host}: {text}", result(a), result(b)))
    return rows


def _cell(text: str) -> str:
    return escape_markdown_inline(text)


def releases_page(records: list[dict], declared: dict[str, str] | None = None) -> str:
    """The page; ``declared``: family -> the release range its YAML narrows it to (``releases:``), said for each
    family not verified on every release below."""
    lines = ["# Releases", ""]
    if not records:
        return "\n".join(lines + ["No release record is kept yet.", ""])
    on = verified_on(records)
    everywhere = [f for f, releases in on.items() if len(releases) == len(records)]
    others = sorted(set(on) - set(everywhere))
    releases = ", ".join(_cell(r["transformers"]) for r in records)
    lead = (f"{len(everywhere)} of {len(on)} families are verified under every transformers release below ({releases})"
            if others else f"Every family ({len(on)}) is verified under every transformers release below ({releases})")
    lines += [f"{lead}: its facts collected on the tiny checkpoint under that release, every value read, every "
              "relation checked on every block. The site is built on the oldest; `make verify-newest` verifies every "
              "family again on the newest. This page is made from the kept records of those runs (`releases/`, "
              "checked against the facts in CI).", ""]
    for family in others:
        spec = (declared or {}).get(family)
        why = (f": its YAML narrows it to transformers `{spec}` (the comment above `releases:` in "
               f"families/{_cell(family)}.yaml says why)") if spec else ""
        lines += [f"- {_cell(family)} is verified on {', '.join(on[family])} only{why}."]
    if others:
        lines.append("")
    lines += ["| release | families verified |", "|---|---|"]
    lines += [f"| transformers {_cell(r['transformers'])} | {len(r['families'])} |" for r in records]
    lines.append("")
    for before, after in zip(records, records[1:]):
        lines += [f"## {before['transformers']} to {after['transformers']}", ""]
        gone = sorted(set(before["families"]) - set(after["families"]))
        new = sorted(set(after["families"]) - set(before["families"]))
        if new:
            lines += [f"Verified on {after['transformers']} only: {', '.join(_cell(f) for f in new)}.", ""]
        if gone:
            lines += [f"Verified on {before['transformers']} only: {', '.join(_cell(f) for f in gone)}.", ""]
        changed = {f: _moved(before["families"][f], after["families"][f])
                   for f in sorted(set(before["families"]) & set(after["families"]))}
        still = [f for f, rows in changed.items() if not rows]
        if still:
            lines += [f"Nothing moved on {len(still)} families ({', '.join(_cell(f) for f in still)}): every value is "
                      "read at the same place and served under the same loads, and every relation gives the same result.",
                      ""]
        for family, rows in changed.items():
            if rows:
                lines += [f"### {_cell(family)}", "", f"| what | {_cell(before['transformers'])} | "
                          f"{_cell(after['transformers'])} |", "|---|---|---|"]
                lines += [f"| {_cell(w)} | {_cell(a)} | {_cell(b)} |" for w, a, b in rows]
                lines.append("")
    return "\n".join(lines)
