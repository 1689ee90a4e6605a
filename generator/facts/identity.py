"""The family's identity, proven before anything runs: its ``MODEL_TYPES``, the class its ``build``
loads, the tiny checkpoint's class and every full-size config must name one model type.

A family started with ``new --like llama --model-type starcoder2`` and left unedited claims
``starcoder2`` while its build, its tiny checkpoint and its configs are Llama's: every check of the
page would then run on a Llama model and pass. Nothing else compares them, so this does, at ``pin``,
``claims`` and every collect.

``new --like`` also leaves a marker (:data:`MARKER`) on every copied line that must change; a family
whose files still carry one is refused, naming the file and the line.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.recipe.family import Family
from generator.recipe.fields import REPO_ROOT

#: what ``new --like`` writes beside each copied line that must change (removed once it is changed)
MARKER = "CHANGE ME (copied by new --like"


def text_model_type(cls: type) -> str:
    """The model type a transformers model class loads: its text config's, for a multimodal wrapper
    (as ``nncanon.families.family_for`` reads a checkpoint's: the wrapper's own where a family serves it)."""
    from nncanon.families import text_model_type as family_type

    config = cls.config_class
    text = (getattr(config, "sub_configs", None) or {}).get("text_config")
    inner = getattr(text, "model_type", None)
    return family_type({"model_type": config.model_type, **({"text_config": {"model_type": inner}} if inner else {})})


def serves(cls: type, types: tuple[str, ...]) -> str:
    """The model type of ``types`` a transformers class builds: its own, or one transformers builds with it,
    another model's class (internlm3 with LlamaForCausalLM); else the class's own model type, named as wrong."""
    from nncanon.parts.loading import borrowed_config_class

    return next((t for t in types if borrowed_config_class(cls, t) is not None), text_model_type(cls))


def _config_model_type(config: dict) -> str | None:
    """The model type naming a full-size config's family, as ``nncanon.families.family_for`` reads it."""
    from nncanon.families import text_model_type as family_type

    text = config.get("text_config")
    return family_type(config) if ((text or {}).get("model_type") or config.get("model_type")) else None


def built_classes(module: Any) -> list[type]:
    """The transformers classes the family's ``build`` loads (``build.causal_lm``, ``build.wrapper``)."""
    build = module.build
    return [cls for cls in (getattr(build, "causal_lm", None), getattr(build, "wrapper", None)) if cls is not None]


def import_module(family: Family) -> Any:
    """The family's module; one that does not import (a class renamed in the import but not in ENVOYS) is one
    ClaimError line naming the file and the error, not a traceback."""
    try:
        return importlib.import_module(family.module)
    except Exception as error:  # any error of the module's own code is the contributor's to fix
        where = _relative(REPO_ROOT / Path(*family.module.split(".")).with_suffix(".py"))
        raise ClaimError(family.family, "module", f"{where} does not import: {type(error).__name__}: "
                                                  f"{str(error).splitlines()[0] if str(error) else ''}") from None


def check_identity(family: Family, module: Any = None) -> None:
    """Every place the family names a model type agrees with ``MODEL_TYPES``; else one ClaimError listing
    each that does not, and what to point at the family's own classes."""
    from generator.checkpoint.tiny_tokenizer import transformers_class

    module = module or import_module(family)
    types = tuple(module.MODEL_TYPES)
    source = _relative(Path(module.__file__))
    wrong = []
    for cls in built_classes(module):
        if (found := serves(cls, types)) not in types:
            wrong.append(f"build loads {cls.__name__}, a {found!r} model ({source})")
    tiny = transformers_class(family, family.tiny["class"], "tiny.class")
    if (found := serves(tiny, types)) not in types:
        wrong.append(f"tiny.class {tiny.__name__} builds a {found!r} checkpoint")
    others: dict[str, list[str]] = {}  # model type -> the checkpoints of it, said once per type
    for index, item in enumerate(family.checkpoints):
        config = family.checkpoint_config(item["id"])
        found = _config_model_type(config)
        if found is None and config.get("architectures"):
            found = serves(transformers_class(family, config["architectures"][0],
                                              f"checkpoints[{index}].config.architectures"), types)
        if found is not None and found not in types:
            others.setdefault(found, []).append(f"checkpoints[{index}] {item['id']}")
    wrong += [f"{', '.join(ids)} {'is' if len(ids) == 1 else 'are'} {found!r}" for found, ids in others.items()]
    _check_sole_owner(family, module, types)
    if wrong:
        raise ClaimError(family.family, "identity", f"MODEL_TYPES is {types} but " + "; ".join(wrong) +
                         f"; point {source}'s build and import, tiny.class and the full-size configs at the "
                         f"family's own transformers classes and checkpoints (or MODEL_TYPES at theirs)")


def _check_sole_owner(family: Family, module: Any, types: tuple[str, ...]) -> None:
    """A model type has one family: `nncanon.load` picks one module per model type, so a second module claiming
    it would silently take over every checkpoint of the first (issue 48: a copy of seed_oss did)."""
    from nncanon.families import FAMILIES, model_types_of

    own = module.__name__.rsplit(".", 1)[-1]
    for other in FAMILIES:
        shared = [t for t in types if other != own and t in model_types_of(other)]
        if shared:
            theirs = _relative(Path(module.__file__).with_name(f"{other}.py"))
            raise ClaimError(family.family, "identity", f"MODEL_TYPES claims {', '.join(map(repr, shared))}, which "
                             f"{theirs} serves already ({_relative(Path(module.__file__))}); a model type has one "
                             f"family: extend {other} (a variant), or point this family at its own model type")


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def family_files(family: Family) -> list[Path]:
    """The files ``new --like`` writes for a family: its module, YAML and notes."""
    module = REPO_ROOT / Path(*family.module.split(".")).with_suffix(".py")
    # notes given inline (a list) are in the YAML itself, checked where they are built (notes_parse._inline_notes)
    notes = [family.path.parent / name for name in (family.get("notes"), f"{family.family}.notes.md")
             if isinstance(name, str) and name]
    return list(dict.fromkeys([module, family.path, *notes]))


def check_markers(family: Family) -> None:
    """No line of the family's files still carries the marker ``new --like`` left on what must change."""
    found = []
    for path in family_files(family):
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if MARKER in line:
                found.append((path, number, line))
    if found:
        lines = [f"{_relative(path)}:{number}: {line.split(MARKER, 1)[1].split('):', 1)[-1].strip(' ->*#')}"
                 for path, number, line in found]
        raise ClaimError(family.family, "new --like's markers", f"{len(found)} copied line(s) still marked as "
                         "to change; change each, then delete its marker line:\n" + "\n".join(lines))
