"""Load and validate a family YAML (``families/<family>.yaml``).

A family file says what the encyclopedia page holds that the code cannot measure (lines,
tagline, tags, notes), the recipe of the tiny checkpoint the page is verified on, and the
full-size checkpoints' configs (built on the ``meta`` device for printouts and config tables).

``load_family(path)`` checks the structure and returns a frozen :class:`Family`; every problem
raises :class:`FamilyYamlError`, whose message names the file and the dotted field::

    families/x.yaml: field 'tiny.seed': expected an integer, got 'abc'

The file is strict YAML (generator/recipe/yaml_strict.py: no anchors or aliases, no key given twice) in
UTF-8. ``page`` and ``claims`` are checked key by key, every size in the tiny and full-size configs
against a ceiling, the notes' paths and the family module (generator/recipe/family_sections.py). The notes'
contents and ``saes`` are kept as raw data: their consumers validate them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generator.recipe.fields import (
    REPO_ROOT,
    FamilyYamlError,
    _check_type,
    _display,
    _no_unknown,
    _plain,
    _require,
    _short,
    _string_list,
)

REQUIRED_FIELDS = ("family", "module", "lines", "tagline", "tags", "tiny", "checkpoints")
OPTIONAL_FIELDS = ("group", "notes", "vision_notes", "shared_vision_notes", "saes", "page", "claims", "releases",
                   "variants")
TINY_FIELDS = ("class", "seed", "config", "tokenizer", "processor", "feature_extractor", "sha256", "derived_config_keys")
TINY_REQUIRED = ("class", "seed", "config", "tokenizer", "sha256")  # processor: vision-language families only
TOKENIZER_FIELDS = ("kind", "pipeline", "bpe_vocab_size", "special_tokens")
TOKENIZER_REQUIRED = ("bpe_vocab_size", "special_tokens")
CHECKPOINT_FIELDS = ("id", "printout", "config", "same_as", "inferred")

#: the tiny tokenizer's largest BPE vocabulary (byte symbols + merges; its corpus is a few KB)
BPE_VOCAB_MAX = 4096

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, eq=False)
class Family:
    """A validated family file. ``raw`` is the whole parsed YAML (plain dicts and lists)."""

    path: Path
    family: str
    module: str
    lines: tuple[str, ...]
    tagline: str
    tags: tuple[str, ...]
    tiny: dict[str, Any]
    checkpoints: tuple[dict[str, Any], ...]
    notes: Any = None
    vision_notes: Any = None
    shared_vision_notes: Any = None
    saes: Any = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    #: the family this is a variant of (``variants:``), None for a family's own recipe
    base: str | None = None

    @property
    def name(self) -> str:
        return self.family

    def __getitem__(self, key: str) -> Any:
        """Raw access: ``family["tiny"]["config"]``."""
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    @property
    def tiny_recipe(self) -> dict[str, Any]:
        """The tiny recipe without its pin: what the checkpoint's bytes depend on."""
        return {k: v for k, v in self.tiny.items() if k != "sha256"}

    def verified_under(self, release: str) -> bool:
        """Whether the build verifies this family under transformers ``release``: every release, unless the YAML's
        ``releases`` (a version specifier, with a comment saying why) narrows it."""
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        spec = self.raw.get("releases")
        return spec is None or Version(release) in SpecifierSet(spec)

    @property
    def variants(self) -> tuple[dict[str, Any], ...]:
        """The extra tiny recipes (``variants:``), each a layout some released checkpoints use."""
        return tuple(self.raw.get("variants") or ())

    def variant(self, name: str) -> Family:
        """The family as variant ``name`` builds it: ``tiny.config`` with the variant's overrides merged in (a
        nested mapping key by key), the variant's pin, and ``name`` as ``family.name`` in every message."""
        from generator.recipe.variants import variant_family

        return variant_family(self, name)

    @property
    def group(self) -> str:
        """The navigation group (the line, e.g. "Qwen"); the family's first line when the YAML names none."""
        return self.raw.get("group") or self.lines[0]

    @property
    def checkpoint_ids(self) -> list[str]:
        return [c["id"] for c in self.checkpoints]

    @property
    def printout_checkpoint(self) -> str:
        """The id of the checkpoint whose ``print(model)`` the page shows."""
        return next(c["id"] for c in self.checkpoints if c.get("printout"))

    def checkpoint_config(self, checkpoint_id: str) -> dict[str, Any]:
        """The config.json content of a full-size checkpoint, following ``same_as``."""
        by_id = {c["id"]: c for c in self.checkpoints}
        if checkpoint_id not in by_id:
            raise KeyError(
                f"{_display(self.path)}: no checkpoint {checkpoint_id!r} in 'checkpoints' "
                f"(known: {', '.join(by_id)})"
            )
        item = by_id[checkpoint_id]
        while "config" not in item:
            item = by_id[item["same_as"]]
        return json.loads(json.dumps(item["config"]))


def _validate_tiny(file: Path, tiny: Any) -> dict[str, Any]:
    _check_type(file, "tiny", tiny, dict)
    _require(file, tiny, "tiny.", TINY_REQUIRED)
    _no_unknown(file, tiny, "tiny.", TINY_FIELDS)
    _check_type(file, "tiny.class", tiny["class"], str)
    _check_type(file, "tiny.seed", tiny["seed"], int)
    _check_type(file, "tiny.config", tiny["config"], dict)
    if "processor" in tiny:
        _check_type(file, "tiny.processor", tiny["processor"], dict)
    if "feature_extractor" in tiny:
        _check_type(file, "tiny.feature_extractor", tiny["feature_extractor"], dict)
    for n, key in enumerate(_check_type(file, "tiny.derived_config_keys", tiny.get("derived_config_keys", []), list)):
        _check_type(file, f"tiny.derived_config_keys[{n}]", key, str)  # which lines the pin leaves out: derived_keys
    tok = _check_type(file, "tiny.tokenizer", tiny["tokenizer"], dict)
    _require(file, tok, "tiny.tokenizer.", TOKENIZER_REQUIRED)
    _no_unknown(file, tok, "tiny.tokenizer.", TOKENIZER_FIELDS)
    # the presets and pipeline fields are defined once, with the tokenizer they build
    from generator.recipe.tokenizer_presets import PIPELINE_FIELDS, SPLITS, TEMPLATES, TOKENIZER_KINDS

    kind = tok.get("kind", "qwen3_5")
    if kind not in TOKENIZER_KINDS:
        raise FamilyYamlError(file, "tiny.tokenizer.kind",
                              f"unknown tokenizer kind {kind!r} (known: {', '.join(TOKENIZER_KINDS)})")
    pipeline = _check_type(file, "tiny.tokenizer.pipeline", tok.get("pipeline") or {}, dict)
    _no_unknown(file, pipeline, "tiny.tokenizer.pipeline.", tuple(PIPELINE_FIELDS))
    for field_name, table in (("split", SPLITS), ("chat_template", TEMPLATES)):
        if field_name in pipeline and pipeline[field_name] not in table:
            raise FamilyYamlError(file, f"tiny.tokenizer.pipeline.{field_name}",
                                  f"{pipeline[field_name]!r} is none of {', '.join(table)}")
    size = _check_type(file, "tiny.tokenizer.bpe_vocab_size", tok["bpe_vocab_size"], int)
    if size < 257:
        raise FamilyYamlError(
            file, "tiny.tokenizer.bpe_vocab_size", f"must exceed the 256 byte symbols, got {size}"
        )
    if size > BPE_VOCAB_MAX:
        raise FamilyYamlError(
            file,
            "tiny.tokenizer.bpe_vocab_size",
            f"{size} exceeds {BPE_VOCAB_MAX}: the tiny tokenizer's corpus is a few KB; give a few hundred",
        )
    specials = _check_type(file, "tiny.tokenizer.special_tokens", tok["special_tokens"], dict)
    seen: dict[int, str] = {}
    for token, token_id in specials.items():
        dotted = f"tiny.tokenizer.special_tokens.{token}"
        _check_type(file, dotted, token, str)
        _check_type(file, dotted, token_id, int)
        if token_id in seen:
            raise FamilyYamlError(file, dotted, f"id {token_id} is already {seen[token_id]!r}")
        seen[token_id] = token
    sha = tiny["sha256"]
    if sha is not None:
        _check_type(file, "tiny.sha256", sha, str)
        if not _SHA256.match(sha):
            raise FamilyYamlError(
                file,
                "tiny.sha256",
                f"expected 64 lowercase hex digits or null, got {sha!r} "
                "(run: python -m generator pin <family>)",
            )
    return tiny


def _check_inferred(file: Path, prefix: str, item: dict) -> None:
    """``inferred``: what of this checkpoint's entry was not read from its config.json, and why. Keys are
    config fields (top level, text_config or vision_config), ``config`` (the whole file) or ``same_as``
    (that it equals another checkpoint's); the page marks each."""
    inferred = _check_type(file, f"{prefix}.inferred", item["inferred"], dict)
    config = item.get("config") or {}
    fields = {*config, *config.get("text_config", {}), *config.get("vision_config", {})}
    allowed = ("same_as",) if "same_as" in item else ("config", *sorted(fields))
    for key, why in inferred.items():
        if key not in allowed:
            raise FamilyYamlError(file, f"{prefix}.inferred.{key}",
                                  f"not a field of this checkpoint's entry (one of: {', '.join(allowed[:8])}"
                                  f"{', ...' if len(allowed) > 8 else ''})")
        if not isinstance(why, str) or not why.strip():
            raise FamilyYamlError(file, f"{prefix}.inferred.{key}", "say why it is inferred (a non-empty string)")


def _validate_checkpoints(file: Path, items: Any) -> tuple[dict[str, Any], ...]:
    _check_type(file, "checkpoints", items, list)
    if not items:
        raise FamilyYamlError(file, "checkpoints", "must list at least one checkpoint")
    ids: dict[str, int] = {}
    for i, item in enumerate(items):
        prefix = f"checkpoints[{i}]"
        _check_type(file, prefix, item, dict)
        _require(file, item, f"{prefix}.", ("id",))
        _no_unknown(file, item, f"{prefix}.", CHECKPOINT_FIELDS)
        cid = _check_type(file, f"{prefix}.id", item["id"], str)
        if cid in ids:
            raise FamilyYamlError(
                file, f"{prefix}.id", f"{cid!r} is listed twice (also checkpoints[{ids[cid]}])"
            )
        ids[cid] = i
        if "printout" in item:
            _check_type(file, f"{prefix}.printout", item["printout"], bool)
        has_config, has_same = "config" in item, "same_as" in item
        if has_config == has_same:
            raise FamilyYamlError(
                file,
                f"{prefix}.config",
                "give exactly one of 'config' (a mapping) and 'same_as' (a checkpoint id)",
            )
        if has_config:
            _check_type(file, f"{prefix}.config", item["config"], dict)
        else:
            _check_type(file, f"{prefix}.same_as", item["same_as"], str)
        if "inferred" in item:
            _check_inferred(file, prefix, item)
    for i, item in enumerate(items):
        seen = [item["id"]]
        cur = item
        while "same_as" in cur:
            target = cur["same_as"]
            if target not in ids:
                raise FamilyYamlError(
                    file, f"checkpoints[{i}].same_as", f"{target!r} is not a checkpoint id in this file"
                )
            if target in seen:
                raise FamilyYamlError(
                    file, f"checkpoints[{i}].same_as", f"circular same_as: {' -> '.join([*seen, target])}"
                )
            seen.append(target)
            cur = items[ids[target]]
    printouts = [item["id"] for item in items if item.get("printout")]
    if len(printouts) != 1:
        raise FamilyYamlError(
            file,
            "checkpoints",
            f"exactly one checkpoint must have 'printout: true', found {len(printouts)}"
            + (f" ({', '.join(printouts)})" if printouts else ""),
        )
    return tuple(items)


# ---------------------------------------------------------------------------------------
# public API


def families_dir() -> Path:
    """The repository's ``families/`` directory, or ``$NNCANON_FAMILIES`` (tests build from a copy)."""
    return Path(os.environ.get("NNCANON_FAMILIES") or REPO_ROOT / "families")


# A family's name is its page's path (families/<name>/) and its facts' (facts/<name>.json), beside the
# site's own: so an identifier, and none of the names those directories already hold.
_NAME = re.compile(r"[a-z][a-z0-9_]*")
RESERVED_NAMES = frozenset({"index", "families", "facts", "assets", "search", "shared", "sitemap", "llms", "404"})


def check_name(path: Path) -> None:
    name = path.stem
    if not _NAME.fullmatch(name) or name in RESERVED_NAMES:
        why = ("is one of the site's own paths" if name in RESERVED_NAMES
               else "is not lowercase letters, digits and underscores starting with a letter")
        raise FamilyYamlError(path, None, f"the family name {name!r} (the file's name) {why}; rename the file and its "
                              f"'family:' field to an identifier not in {', '.join(sorted(RESERVED_NAMES))}")


def family_path(name: str) -> Path:
    path = families_dir() / f"{name}.yaml"
    if not _NAME.fullmatch(name):  # "../../x" would read a YAML, and the code it names, from anywhere
        known = ", ".join(sorted(p.stem for p in families_dir().glob("*.yaml"))) or "none"
        raise FamilyYamlError(families_dir(), None, f"{name!r} is not a family name (the stem of a families/*.yaml "
                                                    f"file: one of {known})")
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in families_dir().glob("*.yaml"))) or "none"
        raise FamilyYamlError(path, None, f"no such family file (known families: {known})")
    return path


def load_family(path: str | Path) -> Family:
    """Parse and validate one family YAML."""
    from generator.recipe import family_sections as sections
    from generator.recipe.yaml_strict import StrictYamlError, load

    path = Path(path)
    check_name(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise FamilyYamlError(path, None, f"cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise FamilyYamlError(
            path,
            None,
            f"byte {e.start} (0x{raw[e.start]:02x}) is not UTF-8; save the file as UTF-8",
            line=line,
        ) from None
    try:
        data = load(text)
    except StrictYamlError as e:
        raise FamilyYamlError(path, None, e.message, line=e.line) from None
    if not isinstance(data, dict):
        raise FamilyYamlError(path, None, f"expected a mapping at the top level, got {type(data).__name__}")
    _plain(path, data, "")
    data = json.loads(json.dumps(data))  # plain JSON data, as the facts hold it

    _no_unknown(path, data, "", REQUIRED_FIELDS + OPTIONAL_FIELDS)
    _require(path, data, "", REQUIRED_FIELDS)
    name = _check_type(path, "family", data["family"], str)
    if name != path.stem:
        raise FamilyYamlError(
            path, "family", f"is {name!r} but the file is named {path.name!r}; they must match"
        )
    module = _check_type(path, "module", data["module"], str)
    lines = _string_list(path, "lines", data["lines"])
    tagline = _check_type(path, "tagline", data["tagline"], str)
    tags = _string_list(path, "tags", data["tags"])
    if "releases" in data:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(_check_type(path, "releases", data["releases"], str))
        except InvalidSpecifier:
            raise FamilyYamlError(path, "releases", f"{_short(data['releases'])} is not a version specifier; write "
                                  "the transformers releases the family is verified on, e.g. '>=5.23,<5.24'") from None
    if "group" in data and not (isinstance(data["group"], str) and data["group"].strip()):
        raise FamilyYamlError(path, "group", "name the line the navigation groups this family under (a string)")
    tiny = _validate_tiny(path, data["tiny"])
    checkpoints = _validate_checkpoints(path, data["checkpoints"])
    sections.check_sections(path, data, tiny, checkpoints)
    if "variants" in data:  # each variant's recipe is the tiny one merged with its changes: checked as it is
        from generator.recipe.variants import check_variants

        check_variants(path, data["variants"], tiny, checkpoints)
    return Family(
        path=path,
        family=name,
        module=module,
        lines=lines,
        tagline=tagline,
        tags=tags,
        tiny=tiny,
        checkpoints=checkpoints,
        notes=data.get("notes"),
        vision_notes=data.get("vision_notes"),
        shared_vision_notes=data.get("shared_vision_notes"),
        saes=data.get("saes"),
        raw=data,
    )


def get_family(family: str | Path | Family) -> Family:
    """A Family from a Family, a family name, or a YAML path."""
    if isinstance(family, Family):
        return family
    if isinstance(family, Path) or str(family).endswith(".yaml"):  # a file named on purpose; a name stays in families/
        return load_family(family)
    return load_family(family_path(str(family)))


def all_families() -> list[Family]:
    """Every ``families/*.yaml``, loaded and validated, sorted by name; no ``*.yml`` beside them (it would
    be ignored without a word), and no two serving one library module (two pages for one family)."""
    directory = families_dir()
    if not directory.is_dir():
        raise FamilyYamlError(directory, None, "no such directory of family YAMLs; set NNCANON_FAMILIES to one, "
                              "or unset it for the repository's families/")
    for stray in sorted(directory.glob("*.yml")):
        raise FamilyYamlError(stray, None, f"a family file must end in .yaml; rename it to {stray.stem}.yaml")
    families = [load_family(p) for p in sorted(directory.glob("*.yaml"))]
    by_module: dict[str, Family] = {}
    for family in families:
        if family.module in by_module:
            raise FamilyYamlError(family.path, "module", f"{family.module} is also {by_module[family.module].path.name}'s "
                                  f"module: one family, one YAML; remove one or point it at its own module")
        by_module[family.module] = family
    return families
