"""The family registry: a checkpoint's text model_type -> the family module that standardizes it.

A family module declares FAMILY, MODEL_TYPES, RENAME, ENVOYS (module class -> host class),
ROOT (its StandardModel subclass) and the functions build, required_paths, dim_sizes and
prepare (see qwen3_5_moe_text for the reference).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path
from types import ModuleType

#: every family module in this package (shared parts start with an underscore)
FAMILIES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


class UnknownFamily(ValueError):
    pass


def family_module(name: str) -> ModuleType:
    if name not in FAMILIES:
        raise UnknownFamily(f"no family {name!r}; nncanon knows {', '.join(FAMILIES)}")
    return importlib.import_module(f"{__name__}.{name}")


def text_model_type(config: dict) -> str:
    """The model_type that names the family: the text config's, for a multimodal wrapper."""
    text = config.get("text_config")
    return (text or config).get("model_type") or config["model_type"]


def family_for(checkpoint: Path) -> ModuleType:
    config_file = Path(checkpoint) / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{checkpoint}: no config.json; nncanon.load takes a local checkpoint directory")
    model_type = text_model_type(json.loads(config_file.read_text()))
    for name in FAMILIES:
        module = family_module(name)
        if model_type in module.MODEL_TYPES:
            return module
    raise UnknownFamily(f"{config_file}: text model_type {model_type!r} is not a family nncanon knows "
                        f"({', '.join(FAMILIES)})")
