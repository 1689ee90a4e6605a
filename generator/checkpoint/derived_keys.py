"""Config keys a transformers release derives from the others and writes into config.json, which the pin leaves out.

5.25's FalconConfig computes ``num_key_value_heads`` (the key/value heads the attention produces) from
``num_kv_heads``, ``multi_query`` and ``new_decoder_architecture`` and writes it into every config.json it saves;
5.23 and 5.24 do not. The checkpoint is otherwise byte for byte the same, so a pin that counted that line would
hold under one release only. The recipe names such keys (``tiny.derived_config_keys``, with a comment saying which
release derives them from what); the pin hashes config.json without their top-level lines, as it does without
``"transformers_version"`` (`generator.checkpoint.checkpoints.content_sha256`). Ignoring a line is safe only for a
value the rest of the file fixes, so every build checks each listed key it finds: not a field the config class
takes (a field is free data the pin must cover), not set by the recipe, and given back with the same value when the
config is built from the file without it; a release that does not write the key has nothing left out.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path
from typing import Any

from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError

FIELD = "tiny.derived_config_keys"


def listed(fam: Family) -> tuple[str, ...]:
    """The config keys the recipe says a release derives (none by default)."""
    return tuple(fam.tiny.get("derived_config_keys") or ())


def _line(key: str) -> re.Pattern:
    """A top-level line (save_pretrained's indent of 2) holding ``key`` with a scalar value."""
    scalar = rb'(?:-?[0-9][0-9.eE+-]*|true|false|null|"[^"\\\r\n]*")'
    return re.compile(rb'^  "' + re.escape(key.encode()) + rb'":[ \t]*' + scalar + rb',?[ \t]*\r?\n', re.MULTILINE)


def without(data: bytes, keys: tuple[str, ...]) -> bytes:
    """config.json's bytes without the top-level lines of ``keys`` (a key a release does not write: nothing)."""
    for key in keys:
        data = _line(key).sub(b"", data, count=1)
    return data


def _fields(config_class: type) -> set[str]:
    """The fields a config class takes: its dataclass fields (5.23 on), else its constructor's parameters."""
    if dataclasses.is_dataclass(config_class):
        return {f.name for f in dataclasses.fields(config_class)}
    return set(inspect.signature(config_class.__init__).parameters)


def check(fam: Family, config_class: Any, directory: Path) -> None:
    """Each listed key the installed release wrote into ``directory``'s config.json is derived from the rest of it;
    else one error naming the key and why the pin must count it."""
    keys = listed(fam)
    if not keys:
        return
    written = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    fields, recipe = _fields(config_class), fam.tiny["config"]
    for key in keys:
        if key not in written:
            continue  # a release that does not derive it: nothing to leave out
        why = None
        if key in recipe:
            why = "the recipe sets it"
        elif key in fields:
            why = f"it is a field {config_class.__name__} takes, so its value is free"
        else:
            again = config_class.from_dict({k: v for k, v in written.items() if k != key})
            if getattr(again, key, None) != written[key]:
                why = (f"{config_class.__name__} built from config.json without it gives "
                       f"{getattr(again, key, None)!r}, not the {written[key]!r} written")
        if why is not None:
            raise FamilyYamlError(fam.path, FIELD, f"{key!r} is not derived ({why}): the pin must count its line; "
                                                   "remove it from the list")
