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
from collections.abc import Iterable
from pathlib import Path

from generator.disk import room
from generator.recipe.fields import REPO_ROOT

RECORDS = REPO_ROOT / "releases"
LIBRARY_RECORD = REPO_ROOT / "nncanon" / "verified_releases.json"


class ReleaseRecordError(ValueError):
    """A release record that is missing, damaged or differs from the facts it is checked against; a facts file or
    the library's record that cannot be read. One line naming the file, the field and the fix."""


class Each:
    """The shape of a JSON object whose keys are free (family names, value keys) and whose values all have ``shape``."""

    def __init__(self, shape):
        self.shape = shape


_VALUE = {"read_at": str, "availability": Each(bool), "writable": bool}
_RELATION = {"errors": dict, "skipped": dict}
#: only what a record keeps and the Releases page reads; a fixed key must be there, other keys are let be
RECORD = {"transformers": str, "families": Each({"values": Each(_VALUE), "relations": Each(_RELATION)})}
LIBRARY = Each([str])
#: only what a record is made from
FACTS = {"family": str, "versions": {"transformers": str},
         "hosts": [{"path": str, "values": [{"name": str, **_VALUE}]}],
         "relations": [{"host": str, "text": str, **_RELATION}]}
_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "true or false", type(None): "null"}


def _json_name(kind) -> str:
    return _JSON_NAMES.get(kind, "a number")


def _key(where: str, key: str) -> str:
    shown = key if len(key) <= 60 else key[:57] + "..."
    return f"{where}.{key}" if key.isidentifier() else f"{where}[{shown!r}]"


def misshapen(value, shape, where: str = "") -> str | None:
    """Where ``value`` first differs from ``shape`` and how (``field 'families.llama.values' is an array, expected an
    object``); None when it fits. A shape is a type, a dict of required keys, ``[shape]`` or :class:`Each`."""
    expected = dict if isinstance(shape, (dict, Each)) else list if isinstance(shape, list) else shape
    # bool is an int to Python: a count where a flag belongs is a wrong record all the same
    if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
        what = f"field {where.lstrip('.')!r}" if where else "the file"
        return f"{what} is {_json_name(type(value))}, expected {_json_name(expected)}"
    if isinstance(shape, dict):
        for key, inner in shape.items():
            if key not in value:
                return f"field {_key(where, key).lstrip('.')!r} is missing"
            if (found := misshapen(value[key], inner, _key(where, key))) is not None:
                return found
    elif isinstance(shape, (Each, list)):
        inner = shape.shape if isinstance(shape, Each) else shape[0]
        items = value.items() if isinstance(shape, Each) else ((f"[{i}]", v) for i, v in enumerate(value))
        for key, item in items:
            here = _key(where, key) if isinstance(shape, Each) else where + key
            if (found := misshapen(item, inner, here)) is not None:
                return found
    return None


def read_json(path: Path, shape, fix: str):
    """``path``'s JSON if it is of ``shape``; else one :class:`ReleaseRecordError` line naming the file, what is
    wrong (cut short, not text, a field missing or of another type) and ``fix``."""
    shown = shown_path(path)
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ReleaseRecordError(f"{shown}: not UTF-8 text (byte {e.start}), a damaged file; {fix}") from None
    except json.JSONDecodeError as e:
        raise ReleaseRecordError(f"{shown}: not valid JSON ({e.msg}: line {e.lineno}, column {e.colno}), "
                                 f"a file cut short or edited; {fix}") from None
    if (found := misshapen(data, shape)) is not None:
        raise ReleaseRecordError(f"{shown}: {found}; {fix}")
    return data


def shown_path(path: Path) -> str:
    try:
        return str(Path(path).relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


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


def release_of(facts_dir: Path, families: Iterable[str] | None = None) -> tuple[str, dict[str, dict]]:
    """The transformers release every facts file of ``facts_dir`` was collected under, and the files by family;
    ``families``: only theirs (a run that failed a family leaves its older facts file behind)."""
    files = sorted(p for p in Path(facts_dir).glob("*.json") if p.name != "index.json")
    if families is not None:
        files = [p for p in files if p.stem in set(families)]
    if not files:
        raise ReleaseRecordError(f"{facts_dir}: no facts files" + (" of the families asked for" if families is not None
                                 else "") + "; collect them first (python -m generator verify)")
    by_family, releases = {}, set()
    for path in files:
        facts = read_json(path, FACTS, f"collect it again: python -m generator verify --force {path.stem}")
        if facts["family"] != path.stem:
            raise ReleaseRecordError(f"{shown_path(path)}: field 'family' is {facts['family']!r} but the file is named "
                                     f"{path.name}; collect it again: python -m generator verify --force {path.stem}")
        by_family[facts["family"]] = facts
        releases.add(facts["versions"]["transformers"])
    if len(releases) != 1:
        raise ReleaseRecordError(f"{facts_dir}: facts from several transformers releases ({', '.join(sorted(releases))}); "
                                 "collect them again under one (python -m generator verify --force)")
    return releases.pop(), by_family


def record(facts_dir: Path, families: Iterable[str] | None = None) -> dict:
    """The record of ``facts_dir``'s release: every family's facts, or only ``families``' (those a run verified)."""
    release, by_family = release_of(facts_dir, families)
    return {"transformers": release, "families": {name: digest(f) for name, f in sorted(by_family.items())}}


def record_path(release: str) -> Path:
    return RECORDS / f"transformers-{release}.json"


def _dump(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def read_record(path: Path) -> dict:
    """A kept record, checked: its shape, and its ``transformers`` field against its file name (an edited field
    would list the families under a release they were not verified on)."""
    from packaging.version import InvalidVersion, Version

    named = Path(path).stem.removeprefix("transformers-")
    shown = shown_path(path)
    fix = (f"restore it (git checkout -- {shown}) or write it again: python -m generator releases, from facts "
           f"collected under transformers {named}")
    kept = read_json(path, RECORD, fix)
    if kept["transformers"] != named:
        raise ReleaseRecordError(f"{shown}: field 'transformers' is {kept['transformers']!r} but the file is named "
                                 f"for {named!r}; set it back to {named!r}, or {fix}")
    try:
        Version(named)
    except InvalidVersion:
        raise ReleaseRecordError(f"{shown}: {named!r} is not a transformers release; a record is "
                                 "releases/transformers-<release>.json: rename or remove it") from None
    return kept


def library_record() -> dict[str, list[str]]:
    """Each family's verified releases, from every record kept: what ``nncanon.releases.verified_on`` reads."""
    from packaging.version import Version

    families: dict[str, list[str]] = {}
    for path in sorted(RECORDS.glob("transformers-*.json")):
        kept = read_record(path)
        for family in kept["families"]:
            families.setdefault(family, []).append(kept["transformers"])
    return {family: sorted(releases, key=Version) for family, releases in sorted(families.items())}


def write(facts_dir: Path) -> Path:
    """Write the record of ``facts_dir``'s release, and the library's list of verified releases."""
    return keep(record(facts_dir))


def keep(made: dict) -> Path:
    """Keep ``made`` as its release's record in ``releases/`` and write the library's list of verified releases
    again (``write``'s, and ``make release-accept``'s with a candidate's record)."""
    path = record_path(made["transformers"])
    write_record(path, made)
    with room(LIBRARY_RECORD.parent):
        _replace(LIBRARY_RECORD, _dump(library_record()))
    return path


def write_record(path: Path, made: dict) -> Path:
    """Write the record ``made`` to ``path`` whole (a kept one in ``releases/``, or a candidate elsewhere)."""
    path = Path(path)
    with room(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace(path, _dump(made))
    return path


def _replace(path: Path, text: str) -> None:
    # whole or not at all: a write cut short by a full disk would leave a record the next check cannot read
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def check(facts_dir: Path) -> Path:
    """Fail, naming the first differences, when the kept record of ``facts_dir``'s release is not what its facts say."""
    made = record(facts_dir)
    path = record_path(made["transformers"])
    if not path.exists():
        raise ReleaseRecordError(f"{path.relative_to(REPO_ROOT)} is missing: write it with "
                                 f"python -m generator releases (NNCANON_BUILD={Path(facts_dir).parent})")
    kept = read_record(path)
    found = differences(kept, made)
    library = read_json(LIBRARY_RECORD, LIBRARY, f"restore it (git checkout -- {shown_path(LIBRARY_RECORD)}) or write it "
                                                 "again: python -m generator releases")
    if library != library_record():
        found.append(f"{LIBRARY_RECORD.relative_to(REPO_ROOT)} does not list the kept records' families")
    if found:
        shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        raise ReleaseRecordError(f"{path.relative_to(REPO_ROOT)} differs from the facts in {facts_dir}: {shown}; "
                                 "write it again with python -m generator releases")
    return path


def differences(kept: dict, made: dict) -> list[str]:
    """Every family, value and relation ``made`` says differently from ``kept`` (--check's, verify-newest's)."""
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
