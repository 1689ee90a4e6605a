"""The family registry: a checkpoint's text model_type -> the family module that standardizes it.

A family module declares FAMILY, MODEL_TYPES, RENAME, ENVOYS (module class -> host class),
ROOT (its StandardModel subclass) and the functions build, required_paths, dim_sizes and
prepare (see qwen3_5_moe_text for the reference); before_the_head and past_the_head when the
forward does more than lm_head between the final norm and its logits (`nncanon.lens`); layout_envoys(config) (entries over ENVOYS)
and layout_root(config) when the config picks among layouts (`nncanon.core.model.wrap`); TEXT_TASK when its text load
runs under another pipeline than text-generation (an encoder's feature-extraction: bert). A family module written outside nncanon
is added with `register`.

Finding a checkpoint's family imports that family's module only: which module serves a model_type is
read from each module's ``MODEL_TYPES`` literal without importing it (`model_types_of`). A family module
imports its transformers modeling module, which an older or newer release may not have; that then fails
the one family, with a `FamilyImportError` naming it and the missing module, not every family.
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import pkgutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType

#: every family module in this package (shared parts start with an underscore)
FAMILIES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))

#: family modules added with `register`, by model_type; they come before the built-in ones
REGISTERED: dict[str, ModuleType] = {}


class UnknownFamily(ValueError):
    pass


class CheckpointError(ValueError):
    """A checkpoint `nncanon.load` cannot read: the message names the file, the problem and the fix."""


class UnsupportedModelType(CheckpointError, UnknownFamily):
    """The checkpoint's model_type has no family module."""


class FamilyImportError(ImportError):
    """A family module that cannot be imported on the installed transformers (a modeling module or a name
    its release does not have): the message names the family, what is missing and the release."""


def _transformers_release() -> str:
    try:
        return version("transformers")
    except PackageNotFoundError:
        return "(not installed)"


def family_module(name: str) -> ModuleType:
    if name not in FAMILIES:
        raise UnknownFamily(f"no family {name!r}; nncanon knows {', '.join(FAMILIES)}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError as error:
        if isinstance(error, FamilyImportError):
            raise
        missing = error.name or str(error)
        what = f"{missing}, which" if isinstance(error, ModuleNotFoundError) else f"{missing} ({error}), which"
        raise FamilyImportError(
            f"nncanon family {name!r} cannot be imported: it needs {what} transformers "
            f"{_transformers_release()} does not have", name=error.name) from error


@functools.cache
def model_types_of(name: str) -> tuple[str, ...]:
    """The family module ``name``'s MODEL_TYPES, read from its source without importing it (the module imports
    transformers' modeling code); a module whose MODEL_TYPES is not one literal is imported to ask it."""
    source = Path(__file__).with_name(f"{name}.py").read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "MODEL_TYPES"):
            try:
                return tuple(ast.literal_eval(node.value))
            except ValueError:
                break
    return tuple(family_module(name).MODEL_TYPES)


def module_for_model_type(model_type: str) -> str | None:
    """The name of the built-in family module serving ``model_type`` (not imported), or None."""
    return next((name for name in FAMILIES if model_type in model_types_of(name)), None)


def register(module: ModuleType) -> ModuleType:
    """Serve the checkpoints of ``module``'s MODEL_TYPES with ``module`` (a family module written
    outside nncanon, or a variant of one), ahead of the built-in families; `unregister` undoes it."""
    for name in ("FAMILY", "MODEL_TYPES", "RENAME", "ENVOYS", "ROOT", "build", "required_paths", "dim_sizes", "prepare"):
        if not hasattr(module, name):
            raise TypeError(f"{module.__name__} is not a family module: it has no {name} (see nncanon.families)")
    for model_type in module.MODEL_TYPES:
        REGISTERED[model_type] = module
    return module


def unregister(module: ModuleType) -> None:
    for model_type in [t for t, m in REGISTERED.items() if m is module]:
        del REGISTERED[model_type]


def text_model_type(config: dict) -> str:
    """The model_type that names the family: the text config's, for a multimodal wrapper, unless a family
    serves the wrapper's own (llava: its text model is a llama, but the llama family is not the wrapper's)."""
    text = config.get("text_config")
    own = config.get("model_type")
    if text and own and (own in REGISTERED or module_for_model_type(own)):
        return own
    return (text or config).get("model_type") or config["model_type"]


def read_config(checkpoint: Path) -> dict:
    """``checkpoint``'s config.json as a dict, or a `CheckpointError` saying what is wrong and how to fix it."""
    checkpoint = Path(checkpoint)
    local = "nncanon.load takes a local checkpoint directory or a Hugging Face hub id ('org/name')"
    if not checkpoint.exists():
        raise CheckpointError(f"{checkpoint}: no such file or directory; {local}")
    if not checkpoint.is_dir():
        raise CheckpointError(f"{checkpoint} is a file, not a directory; {local}, the one holding config.json")
    config_file = checkpoint / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{checkpoint}: no config.json; {local} with its config.json and weights")
    try:
        config = json.loads(config_file.read_text())
    except UnicodeDecodeError as error:
        raise CheckpointError(f"{config_file} is not text ({error.reason}); replace it with the checkpoint's "
                              "config.json") from None
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{config_file} is not valid JSON ({error.msg} at line {error.lineno}, column "
                              f"{error.colno}); fix it, or replace it with the checkpoint's config.json") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{config_file} holds a JSON {type(config).__name__}, not an object; a config.json is "
                              "one object of the model's settings: replace it with the checkpoint's config.json")
    text = config.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise CheckpointError(f"{config_file}: text_config is a JSON {type(text).__name__}, not an object; "
                              "replace it with the checkpoint's config.json")
    model_type = (text or {}).get("model_type") or config.get("model_type")
    if not model_type:
        raise CheckpointError(f"{config_file} has no model_type, so nncanon cannot tell the family; add the "
                              f"checkpoint's \"model_type\" (one of {', '.join(known_model_types())})")
    if not isinstance(model_type, str):
        raise CheckpointError(f"{config_file}: model_type is {model_type!r}, not a string; set it to the "
                              f"checkpoint's model type (one of {', '.join(known_model_types())})")
    return config


def known_model_types() -> list[str]:
    types = list(REGISTERED)
    for name in FAMILIES:
        types += [t for t in model_types_of(name) if t not in types]
    return types


def family_for(checkpoint: Path) -> ModuleType:
    return family_for_config(read_config(checkpoint), Path(checkpoint) / "config.json")


def family_for_config(config: dict, where: Path | str) -> ModuleType:
    """The family module serving ``config`` (a config.json's dict); ``where`` names it in the error."""
    model_type = text_model_type(config)
    if model_type in REGISTERED:
        return REGISTERED[model_type]
    name = module_for_model_type(model_type)
    if name is not None:
        return family_module(name)
    raise UnsupportedModelType(
        f"{where}: model_type {model_type!r} has no nncanon family; nncanon serves "
        f"{', '.join(known_model_types())} (write a family module for it and add it with "
        "nncanon.families.register)")
