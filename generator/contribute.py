"""Contributor tooling: start a family from another (``new``) and write its claims from the code (``claims``).

``python -m generator new gemma2 --like llama`` writes ``nncanon/families/gemma2.py``,
``families/gemma2.yaml`` and ``families/gemma2.notes.md`` from llama's, renamed, its pin null and its
claims empty: a starting point the build then judges. ``python -m generator claims gemma2`` runs the
family's module on its tiny checkpoint under every load and writes ``claims.values`` (every host kind,
every value, its layout and where it is read) into the YAML for review; the relations, edits and
notes are still checked by the build, so a claim written here is only the code's own word until
the build proves what each value means.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Callable
from pathlib import Path

from generator.facts.identity import MARKER, check_identity, import_module
from generator.recipe.family import RESERVED_NAMES, Family, families_dir, get_family
from generator.recipe.fields import REPO_ROOT, FamilyYamlError

# What a command writes into code or a path is a plain identifier, checked whole (fullmatch: `$` alone lets
# a trailing newline through) and written with repr: no argument can put code into the checkout.
_NAME = re.compile(r"[a-z][a-z0-9_]*")
# transformers' model types are lowercase identifiers, some with hyphens (openai-gpt, xlm-roberta)
_MODEL_TYPE = re.compile(r"[a-z][a-z0-9_-]*")
_COMMAND = "python -m generator new"
#: a rewrite of the (module, YAML, notes) texts ``new`` copied, before they are checked and written
Edit = Callable[[str, str, str], tuple[str, str, str]]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def new_family(name: str, like: str, model_type: str | None = None, edit: Edit | None = None) -> list[Path]:
    """Write a new family's module, YAML and notes from ``like``'s; returns the files written. ``edit`` (``new
    --from-survey``'s, generator/factory.py) rewrites the three texts before they are checked and written."""
    check_new_name(name)
    model_type = check_model_type(name if model_type is None else model_type)
    source = get_family(like)
    module_dir = REPO_ROOT / "nncanon" / "families"
    module_path, yaml_path = module_dir / f"{name}.py", families_dir() / f"{name}.yaml"
    notes_path = families_dir() / f"{name}.notes.md"
    mark = f"{MARKER} {like})"
    for path in (module_path, yaml_path, notes_path):
        if path.exists():
            raise FamilyYamlError(path, None, f"already exists; {name!r} is a family already")
    module = (module_dir / f"{like}.py").read_text(encoding="utf-8")
    # either quote: the factory (new --from-survey) writes FAMILY with repr's single quotes
    module = re.sub(r'^FAMILY = (["\']).*\1$', lambda _: f"FAMILY = {name!r}", module, count=1, flags=re.M)
    module = re.sub(r"^MODEL_TYPES = .*$", lambda _: f"MODEL_TYPES = ({model_type!r},)", module, count=1, flags=re.M)
    module = module.replace(f'"{_camel(like)}StandardModel"', f'"{_camel(name)}StandardModel"')
    if module.startswith('"""'):  # the docstring is printed on the page: it must be the new family's
        module = (f'"""\n{mark}: say what {_camel(name)} is and how its block differs from {like}\'s\n"""\n'
                  + module.split('"""', 2)[2])
    module = _mark(module, MODULE_MARKS, mark)
    text = source.path.read_text(encoding="utf-8")
    text = re.sub(r"^family: .*$", f"family: {name}", text, count=1, flags=re.M)
    text = re.sub(r"^module: .*$", f"module: nncanon.families.{name}", text, count=1, flags=re.M)
    text = re.sub(r"^(  sha256:).*$", r"\1 null", text, count=1, flags=re.M)
    text = re.sub(r"^notes: .*$", f"notes: {name}.notes.md", text, count=1, flags=re.M)
    text = _replace_claims_values(text, {})
    text = f"# {mark}: this header describes {like}\n" + _mark(text, YAML_MARKS, mark)
    notes = (families_dir() / f"{like}.notes.md").read_text(encoding="utf-8")
    notes = f"<!-- {mark}: these notes are {like}'s; rewrite them for {name} -->\n" + notes
    if edit is not None:
        module, text, notes = edit(module, text, notes)
    try:  # a module that does not parse would break `import nncanon` for every model in the checkout
        ast.parse(module, filename=str(module_path))
    except SyntaxError as e:
        raise FamilyYamlError(module_dir / f"{like}.py", None, f"the module written from it for {name!r} does not "
                              f"parse (line {e.lineno}: {e.msg}); nothing was written") from None
    module_path.write_text(module, encoding="utf-8")
    yaml_path.write_text(text, encoding="utf-8")
    notes_path.write_text(notes, encoding="utf-8")
    return [module_path, yaml_path, notes_path]


def check_new_name(name: str) -> None:
    """A new family's name: an identifier that is not one of the site's own paths (it names files and a page)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in RESERVED_NAMES:
        why = ("is one of the site's own paths" if name in RESERVED_NAMES
               else "is not lowercase letters, digits and underscores starting with a letter")
        raise FamilyYamlError(_COMMAND, None, f"the family name {name!r} {why}; pick an identifier such as "
                              f"'glm4' (not {', '.join(sorted(RESERVED_NAMES))})")


def check_model_type(model_type: str) -> str:
    """``--model-type``: a model type the installed transformers knows, which the module then serves."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if not isinstance(model_type, str) or not _MODEL_TYPE.fullmatch(model_type):
        raise FamilyYamlError(_COMMAND, None, f"--model-type {model_type!r} is not a model type (lowercase letters, "
                              "digits, '_' and '-', as a config.json's \"model_type\"); pass the one the checkpoint's "
                              "config.json names")
    if model_type not in CONFIG_MAPPING_NAMES:
        close = difflib.get_close_matches(model_type, CONFIG_MAPPING_NAMES, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise FamilyYamlError(_COMMAND, None, f"--model-type {model_type!r} is not a model type the installed transformers "
                              f"knows{hint} (pass --model-type with the config.json's \"model_type\")")
    return model_type


#: what ``new --like`` copies that must change: a line's start -> what to do (a marker line goes above it)
YAML_MARKS = {
    "lines:": "the lines (model generations) this family covers",
    "group:": "the line the navigation lists it under",
    "tagline:": "the tagline describes the other family",
    "tags:": "the tags describe the other family",
    "  class:": "tiny.class: the family's own transformers class",
    "checkpoints:": "the full-size checkpoints and their configs are the other family's",
}
MODULE_MARKS = {
    "from transformers.models.": "import the family's own transformers modeling module",
    "build = ": "build the family's own transformers class",
}


def _mark(text: str, marks: dict[str, str], mark: str) -> str:
    """``text`` with a marker line above each line starting with a key of ``marks`` (indented as it is)."""
    out = []
    for line in text.splitlines(keepends=True):
        why = next((why for start, why in marks.items() if line.startswith(start)), None)
        if why is not None:
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}# {mark}: {why}\n")
        out.append(line)
    return "".join(out)


def served_claims(family: Family) -> dict[str, dict[str, dict]]:
    """``claims.values`` as the family's code serves it on its tiny checkpoint, under every load."""
    import torch

    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.claims import claimed_values
    from generator.facts.collect import PROMPTS
    from generator.facts.loads import resolve_loads
    from generator.facts.measure import host_rows

    module = import_module(family)
    check_identity(family, module)
    torch.set_num_threads(1)
    models = resolve_loads(family, module, checkpoint_dir(family))
    try:
        return claimed_values(host_rows(models, family, module, list(PROMPTS)))
    finally:
        models.close()


def _values_block(values: dict[str, dict[str, dict]]) -> str:
    lines = ["  # The support tables as the page states them: each value's layout and where it is read",
             "  # (written by python -m generator claims; the build checks every line).", "  values:"]
    for host, rows in values.items():
        lines.append(f"    {json.dumps(host)}:")
        for name, claim in rows.items():
            lines.append(f"      {name}: {{layout: {json.dumps(claim['layout'])}, "
                         f"read_at: {json.dumps(claim['read_at'])}}}")
    return "\n".join(lines) + "\n"


def _replace_claims_values(text: str, values: dict) -> str:
    """The YAML text with ``claims.values`` replaced (the rest of the file byte for byte)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == "claims:"), None)
    block = _values_block(values) if values else "  values: {}\n"
    if start is None:
        return text.rstrip("\n") + "\n\nclaims:\n" + block
    end = next((i for i in range(start + 1, len(lines)) if lines[i][:1] not in ("", " ", "\n", "#")), len(lines))
    body = lines[start + 1:end]
    first = next((i for i, line in enumerate(body) if re.match(r"^  values:", line)), None)
    if first is None:
        kept = body
    else:
        # the values block and the comment lines right above it go; what follows it stays
        cut = first
        while cut > 0 and body[cut - 1].lstrip().startswith("#"):
            cut -= 1
        after = next((i for i in range(first + 1, len(body)) if re.match(r"^  \S", body[i])), len(body))
        kept = body[:cut] + body[after:]
    while kept and not kept[-1].strip():
        kept.pop()
    trailing = "\n" if end < len(lines) else ""
    return "".join(lines[:start + 1] + kept) + ("\n" if kept else "") + block + trailing + "".join(lines[end:])


def _refuse_a_moved_release(family: Family) -> None:
    """``claims.values`` are the locked release's: under a release a ``claims.releases`` entry names (one that moved
    read points), writing them would put that release's read points there."""
    import transformers
    from packaging.specifiers import SpecifierSet

    release = transformers.__version__
    for spec in ((family.get("claims") or {}).get("releases") or {}):
        if SpecifierSet(spec).contains(release, prereleases=True):
            raise FamilyYamlError(family.path, f"claims.releases.{spec}", f"transformers {release} is installed, "
                                  "whose read points this entry claims; claims writes claims.values, the locked "
                                  "release's: run it there, and edit this entry from verify's message")


def write_claims(family: str | Path | Family) -> Path:
    """Write ``claims.values`` from the code into the family's YAML; returns the YAML's path."""
    family = get_family(family)
    _refuse_a_moved_release(family)
    text = family.path.read_text(encoding="utf-8")
    family.path.write_text(_replace_claims_values(text, served_claims(family)), encoding="utf-8")
    get_family(family.path)  # the file still validates
    return family.path
