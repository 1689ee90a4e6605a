"""Why a model type stopped the survey, said so that a reader can act on it: one line derived from the failure itself
(the exception's kind, its message, the source line that raised it), never from a table keyed by model type.

The row's failure (``measure.one_line``) says what broke; the reason says whose it is and what to do: a package to
install, a size field the shrink does not know, an input the survey does not make, a config field a published
``config.json`` sets but the class's defaults leave empty, a check of the config class's own, the place in
transformers' code that raised.
"""

from __future__ import annotations

import linecache
import re
import traceback
from pathlib import Path

#: the stages of `measure.survey`, in the words a reason uses
STAGES = {"build": "building the tiny model", "run": "running it on six tokens", "wrap": "mounting the generic parts",
          "measure": "measuring the generic parts"}
#: the inputs of an image-text model's forward that carry the image (the survey feeds token ids, and a fixed image
#: to a forward that requires ``pixel_values``)
IMAGE_INPUTS = ("pixel_values", "image_embeds", "flattened_patches", "perceiver_embeddings", "image_encoder_embeddings",
                "bbox", "pixel")


def raised_at(error: BaseException) -> tuple[str, str] | None:
    """(``package/path.py:line``, the source line) of the innermost frame of ``error`` (of its first cause) inside an
    installed package or this repository, None without a traceback. The path starts at the package (``transformers/models/...``):
    the same on every machine."""
    while error.__cause__ is not None and error.__cause__.__traceback__ is not None:
        error = error.__cause__  # a wrapper's cause raised it (huggingface_hub's strict check wraps the config's own)
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        parts = Path(frame.filename).parts
        for root in ("transformers", "nncanon", "generator", "nnsight", "torch"):
            if root in parts:
                relative = "/".join(parts[len(parts) - parts[::-1].index(root) - 1:])
                line = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
                return f"{relative}:{frame.lineno}", line
    return None


def _in_transformers(at: tuple[str, str] | None) -> bool:
    return at is not None and at[0].startswith("transformers/")


def reason(error: BaseException, stage: str, budget_s: int, defaults_fail: bool = False) -> str:
    """What a reader can do about ``error``, raised while ``stage`` (a key of STAGES); ``defaults_fail``: the config
    class's own defaults, unshrunk, do not build the model either."""
    from generator.survey.tree import NoTree

    text = str(error)
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    at = raised_at(error)
    where = f" ({at[0]}: `{at[1].replace('`', chr(39))}`)" if at else ""  # the line's own backticks as quotes
    kind = type(error).__name__
    if isinstance(error, ImportError):
        package = getattr(error, "name", None) or next(iter(re.findall(r"requires the (\S+) library", text)), None)
        return (f"needs the `{package}` package, which is not installed here (`pip install {package}`); the row is "
                "surveyed again once it is" if package else f"an import failed{where}: install what it names")
    if kind == "TooLarge":
        return ("a size field of this config (or of a sub-config) is not in the survey's shrink table "
                "(generator/survey/shrink.py SIZES), so a weight keeps its full size; add the field's name there")
    if kind == "DefaultsRefused":
        return ("transformers' config class refuses its own defaults, so the survey has nothing to shrink; a family "
                "recipe starts from a published config.json")
    if defaults_fail and kind not in ("TooLarge", "ImportError", "ModuleNotFoundError"):
        return ("transformers' config class does not build this model from its own defaults either, unshrunk: "
                f"nothing the shrink changes; a family recipe starts from a published config.json{where}")
    if kind == "OverBudget":
        return f"took longer than the survey's {budget_s} s: survey it again on a quieter machine"
    if isinstance(error, NoTree):
        return ("the generic parts find no stack of decoder layers to mount (its layers are nested, paired or counted "
                "otherwise than num_hidden_layers); a family module names its modules by hand (RENAME)")
    missing = re.search(r"forward\(\) missing \d+ required positional arguments?: (.+)$", first)
    if missing:
        names = ", ".join(f"`{n}`" for n in re.findall(r"'(\w+)'", missing.group(1)))
        return (f"its forward requires {names}, an input the survey does not make (it feeds token ids, and an image "
                "where `pixel_values` is required); a family supplies it in its recipe's inputs")
    if stage == "run" and isinstance(error, ValueError) and any(name in text for name in IMAGE_INPUTS):
        return ("its forward runs only with an image the survey does not make (it asks for image inputs); a family "
                f"supplies one through its processor{where}")
    if "StrictDataclass" in kind or (at and "/configuration_" in at[0]):
        return ("the config class's own check refuses the shrunk sizes; the shrink (generator/survey/shrink.py) or a "
                f"family recipe's tiny config must satisfy it{where}")
    attribute = re.match(r"'(\w+Config)' object has no attribute '(\w+)'", first)
    if isinstance(error, AttributeError) and attribute and _in_transformers(at):
        return (f"transformers' code reads `{attribute.group(2)}` on `{attribute.group(1)}`, which the class does not "
                f"define by default{where}: a published config.json sets it; a family recipe states it")
    if stage in ("wrap", "measure") and at is not None and at[0].startswith("transformers/pipelines/"):
        return ("transformers' generation pipeline, which the wrap builds, needs the model's tokenizer, and the survey "
                f"runs on token ids with none{where}: a family wraps a checkpoint with its tokenizer")
    if isinstance(error, TypeError) and "NoneType" in text and at is not None and at[0].startswith("transformers/models/"):
        return ("a field the config class leaves None by default is needed here, so its defaults build no model"
                f"{where}: a family recipe sets it from a published config.json")
    mounting = stage in ("wrap", "measure") and at is not None and at[0].startswith(("nncanon/", "nnsight/"))
    if kind in ("FamilyMismatch", "RenameError") or "`rename`" in text or mounting:
        return ("the survey's guess at this tree does not fit the generic parts: a family module states the tree by "
                f"hand (RENAME, its own hosts){where}")
    if _in_transformers(at):
        return (f"transformers' own code raises while {STAGES.get(stage, stage)} on the shrunk config{where}: a size "
                "or input it needs that the survey does not set; a family recipe sets it")
    return (f"raised while {STAGES.get(stage, stage)}{where}: a size of the shrunk config or an input the survey "
            "does not make does not fit; a family recipe states both")
