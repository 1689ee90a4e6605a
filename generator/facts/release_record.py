"""What each transformers release was verified to give: a record per release, from that release's facts.

``python -m generator releases`` reads a facts directory collected under one transformers release (``build/facts``
under the locked one, ``build/transformers-<release>/facts`` from ``make verify-newest``) and writes
``releases/transformers-<release>.json``: per family, every value's location and availability under each load,
and every relation's result. The records are kept in the repository, so the site (the Releases page, each family
page's "verified on" line) and the library (``nncanon/verified_releases.json``, which ``support()`` reads) say
what was verified without collecting again; ``--check`` fails when a record differs from the facts it is
checked against, so a record cannot say what the build no longer shows. Only capability-independent fields
enter a record (the facts are byte-identical under every CPU capability).
"""

from __future__ import annotations

import json
from pathlib import Path

from generator.recipe.fields import REPO_ROOT

RECORDS = REPO_ROOT / "releases"
LIBRARY_RECORD = REPO_ROOT / "nncanon" / "verified_releases.json"


class ReleaseRecordError(ValueError):
    """A release record that is missing or differs from the facts it is checked against."""


def digest(facts: dict) -> dict:
    """A family's facts as a release record keeps them: where each value is read, under which loads it is
    served, whether it is writable, and each relation's result per load."""
    values = {}
    for host in facts["hosts"]:
        for value in host["values"]:
            values[f"{host['path']}::{value['name']}"] = {
                "read_at": value["read_at"], "availability": value["availability"], "writable": value["writable"]}
    relations = {f"{r['host']}::{r['text']}": {"errors": r["errors"], "skipped": r["skipped"]}
                 for r in facts["relations"]}
    return {"values": values, "relations": relations}


def release_of(facts_dir: Path) -> tuple[str, dict[str, dict]]:
    """The transformers release every facts file of ``facts_dir`` was collected under, and the files by family."""
    files = sorted(p for p in Path(facts_dir).glob("*.json") if p.name != "index.json")
    if not files:
        raise ReleaseRecordError(f"{facts_dir}: no facts files; collect them first (python -m generator verify)")
    by_family, releases = {}, set()
    for path in files:
        facts = json.loads(path.read_text(encoding="utf-8"))
        by_family[facts["family"]] = facts
        releases.add(facts["versions"]["transformers"])
    if len(releases) != 1:
        raise ReleaseRecordError(f"{facts_dir}: facts from several transformers releases ({', '.join(sorted(releases))}); "
                                 "collect them again under one (python -m generator verify --force)")
    return releases.pop(), by_family


def record(facts_dir: Path) -> dict:
    release, by_family = release_of(facts_dir)
    return {"transformers": release, "families": {name: digest(f) for name, f in sorted(by_family.items())}}


def record_path(release: str) -> Path:
    return RECORDS / f"transformers-{release}.json"


def _dump(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def library_record() -> dict[str, list[str]]:
    """Each family's verified releases, from every record kept: what ``nncanon.releases.verified_on`` reads."""
    from packaging.version import Version

    families: dict[str, list[str]] = {}
    for path in sorted(RECORDS.glob("transformers-*.json")):
        kept = json.loads(path.read_text(encoding="utf-8"))
        for family in kept["families"]:
            families.setdefault(family, []).append(kept["transformers"])
    return {family: sorted(releases, key=Version) for family, releases in sorted(families.items())}


def write(facts_dir: Path) -> Path:
    """Write the record of ``facts_dir``'s release, and the library's list of verified releases."""
    made = record(facts_dir)
    RECORDS.mkdir(exist_ok=True)
    path = record_path(made["transformers"])
    path.write_text(_dump(made), encoding="utf-8")
    LIBRARY_RECORD.write_text(_dump(library_record()), encoding="utf-8")
    return path


def check(facts_dir: Path) -> Path:
    """Fail, naming the first differences, when the kept record of ``facts_dir``'s release is not what its facts say."""
    made = record(facts_dir)
    path = record_path(made["transformers"])
    if not path.exists():
        raise ReleaseRecordError(f"{path.relative_to(REPO_ROOT)} is missing: write it with "
                                 f"python -m generator releases (NNCANON_BUILD={Path(facts_dir).parent})")
    kept = json.loads(path.read_text(encoding="utf-8"))
    differences = _differences(kept, made)
    if json.loads(LIBRARY_RECORD.read_text(encoding="utf-8")) != library_record():
        differences.append(f"{LIBRARY_RECORD.relative_to(REPO_ROOT)} does not list the kept records' families")
    if differences:
        shown = "; ".join(differences[:5]) + (f"; and {len(differences) - 5} more" if len(differences) > 5 else "")
        raise ReleaseRecordError(f"{path.relative_to(REPO_ROOT)} differs from the facts in {facts_dir}: {shown}; "
                                 "write it again with python -m generator releases")
    return path


def _differences(kept: dict, made: dict) -> list[str]:
    out = []
    for family in sorted(set(kept["families"]) | set(made["families"])):
        if family not in made["families"]:
            out.append(f"{family} is kept but was not collected")
        elif family not in kept["families"]:
            out.append(f"{family} was collected but is not kept")
        else:
            for part in ("values", "relations"):
                a, b = kept["families"][family][part], made["families"][family][part]
                out += [f"{family} {part[:-1]} {key}" for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]
    return out
