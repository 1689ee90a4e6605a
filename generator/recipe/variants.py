"""A family's ``variants:``: extra tiny recipes, one per block layout its released checkpoints use.

One model type can carry several layouts behind config switches (Falcon's one norm, two norms or ALiBi; Stable
LM 2 12B's parallel block with per-head q/k norms beside 1.6B's sequential one; OPT-350m's post-norm). The
family's ``tiny:`` recipe proves one; each variant is that recipe with a few config overrides, its own pin, and
the published checkpoints it stands for::

    variants:
      - name: 12b                       # an identifier; the variant's messages say "stablelm.12b"
        config: {use_parallel_residual: true, qk_layernorm: true}   # merged into tiny.config
        sha256: null                    # python -m generator pin stablelm pins every variant too
        checkpoints: [stabilityai/stablelm-2-12b]                   # ids of this YAML's checkpoints

``generator verify`` proves every variant as it proves the family (every relation on every block, every edit:
generator/facts/variants.py) and the page's Layouts table says which checkpoint has which layout. A checkpoint
no variant lists is the ``tiny:`` recipe's layout. Every problem is one line naming ``variants[i].<field>``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from generator.recipe.fields import FamilyYamlError, _check_type, _no_unknown, _require, _short

VARIANT_FIELDS = ("name", "config", "sha256", "checkpoints")
_NAME = re.compile(r"[a-z0-9][a-z0-9_]*")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def merged(base: Mapping, overrides: Mapping) -> dict:
    """``base`` with ``overrides`` laid over it; a mapping under both keys is merged key by key (a variant
    changes one field of ``rope_parameters`` without restating the rest)."""
    out = json.loads(json.dumps(base))
    for key, value in overrides.items():
        out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) \
            else json.loads(json.dumps(value))
    return out


def check_variants(file: Path, items: Any, tiny: Mapping, checkpoints: tuple[dict, ...]) -> None:
    """The shape of ``variants:`` (no transformers import: render-side commands load YAMLs too); the config
    keys are checked against the model type's config class when a variant is built (:func:`variant_family`)."""
    from generator.recipe.family_sections import TINY_LIMITS, check_recipe_runs, check_sizes

    _check_type(file, "variants", items, list)
    ids = {c["id"] for c in checkpoints}
    names: dict[str, int] = {}
    owners: dict[str, str] = {}
    for i, item in enumerate(items):
        prefix = f"variants[{i}]"
        _check_type(file, prefix, item, dict)
        _no_unknown(file, item, f"{prefix}.", VARIANT_FIELDS)
        _require(file, item, f"{prefix}.", VARIANT_FIELDS)
        name = _check_type(file, f"{prefix}.name", item["name"], str)
        if not _NAME.fullmatch(name):
            raise FamilyYamlError(file, f"{prefix}.name", f"{_short(name)} is not lowercase letters, digits and "
                                                          "underscores (it names the variant's checkpoint directory)")
        if name in names:
            raise FamilyYamlError(file, f"{prefix}.name", f"{name!r} is also variants[{names[name]}]'s name")
        names[name] = i
        config = _check_type(file, f"{prefix}.config", item["config"], dict)
        if not config:
            raise FamilyYamlError(file, f"{prefix}.config", "give the tiny.config fields this layout changes")
        same = [key for key, value in config.items() if tiny["config"].get(key) == value]
        if same:
            raise FamilyYamlError(file, f"{prefix}.config.{same[0]}", "is tiny.config's own value: a variant "
                                                                      "overrides only what its layout changes")
        check_sizes(file, config, f"{prefix}.config", TINY_LIMITS, "(a tiny checkpoint must stay tiny)")
        try:  # the merged recipe must run; its fields are named as the variant's
            check_recipe_runs(file, {**tiny, "config": merged(tiny["config"], config)})
        except FamilyYamlError as error:
            raise FamilyYamlError(file, (error.field or "").replace("tiny.config", f"{prefix}.config", 1),
                                  error.message) from None
        sha = item["sha256"]
        if sha is not None and not (isinstance(sha, str) and _SHA256.match(sha)):
            raise FamilyYamlError(file, f"{prefix}.sha256", f"expected 64 lowercase hex digits or null, got "
                                                            f"{_short(sha)} (run: python -m generator pin <family>)")
        listed = _check_type(file, f"{prefix}.checkpoints", item["checkpoints"], list)
        if not listed:
            raise FamilyYamlError(file, f"{prefix}.checkpoints", "name the published checkpoints with this layout")
        for n, cid in enumerate(listed):
            where = f"{prefix}.checkpoints[{n}]"
            _check_type(file, where, cid, str)
            if cid not in ids:
                raise FamilyYamlError(file, where, f"{cid!r} is not in this file's checkpoints (add its config.json "
                                                   "there, with the source it was read from)")
            if cid in owners:
                raise FamilyYamlError(file, where, f"{cid!r} is also variant {owners[cid]!r}'s: one checkpoint, "
                                                   "one layout")
            owners[cid] = name


def variant_family(family: Any, name: str) -> Any:
    """The :class:`~generator.recipe.family.Family` variant ``name`` builds: merged config, the variant's pin,
    named ``<family>.<name>``. A config key the model type's config class lacks (a typo transformers would keep
    as an unused attribute) is one line naming it."""
    index, spec = next(((i, v) for i, v in enumerate(family.variants) if v["name"] == name), (None, None))
    if spec is None:
        known = ", ".join(v["name"] for v in family.variants) or "none"
        raise FamilyYamlError(family.path, "variants", f"no variant {name!r} (known: {known})")
    import transformers

    model_cls = getattr(transformers, family.tiny["class"], None)
    if model_cls is not None:
        defaults = model_cls.config_class()
        for key in spec["config"]:
            if not hasattr(defaults, key) and key not in defaults.to_dict():
                raise FamilyYamlError(family.path, f"variants[{index}].config.{key}",
                                      f"{model_cls.config_class.__name__} has no field {key!r}; the variant would build "
                                      "the family's own layout with an unused attribute")
    tiny = {**family.tiny, "config": merged(family.tiny["config"], spec["config"]), "sha256": spec["sha256"]}
    raw = {**family.raw, "tiny": tiny, "variants": []}
    return dataclasses.replace(family, family=f"{family.family}.{name}", tiny=tiny, raw=raw, base=family.family)


def rewrite_variant_pin(path: Path, index: int, sha: str) -> None:
    """Replace ``variants[index].sha256`` in place (its own line in the entry), leaving every other byte."""
    import os

    import yaml

    text = path.read_bytes().decode("utf-8")
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(r"^variants:[ \t]*(#.*)?\r?\n?$", line)), None)
    if start is None:
        raise FamilyYamlError(path, "variants", "cannot find the top-level 'variants:' line to pin under")
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^[^\s#]", lines[i])), len(lines))
    items = [i for i in range(start + 1, end) if re.match(r"^[ \t]*- ", lines[i])
             and len(re.match(r"^[ \t]*", lines[i]).group(0)) == min(
                 len(re.match(r"^[ \t]*", lines[j]).group(0)) for j in range(start + 1, end) if lines[j].lstrip().startswith("- "))]
    if index >= len(items):
        raise FamilyYamlError(path, f"variants[{index}]", "cannot find the entry to pin (write each as '- name: ...')")
    stop = items[index + 1] if index + 1 < len(items) else end
    hits = [i for i in range(items[index], stop) if re.match(r"^[ \t]*(- )?sha256:", lines[i])]
    if len(hits) != 1:
        raise FamilyYamlError(path, f"variants[{index}].sha256", "cannot find its one 'sha256:' line "
                                                                 "(write it on its own line, as 'sha256: null')")
    m = re.match(r"^(?P<head>[ \t]*(- )?sha256:[ \t]*)(?P<value>[^#\r\n]*?)(?P<tail>[ \t]*(#[^\r\n]*)?)(?P<eol>\r?\n?)$",
                 lines[hits[0]])
    value = sha if isinstance(yaml.safe_load(sha), str) else f'"{sha}"'
    lines[hits[0]] = f"{m['head']}{value}{m['tail']}{m['eol']}"
    new_text = "".join(lines)
    before, after = yaml.safe_load(text), yaml.safe_load(new_text)
    before["variants"][index]["sha256"] = sha
    if after != before:
        raise FamilyYamlError(path, f"variants[{index}].sha256", "rewriting its line would change more than the pin")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(new_text.encode("utf-8"))
    os.replace(tmp, path)
