"""``python -m generator new <family> --from-survey``: a family written from what the survey found on its model type.

The survey (``measure.py``) has already built the model type tiny, found where the generic parts sit on its
tree (``tree.py``) and measured which relations hold. This writes that down as a family, through ``new --like``'s
own path (``generator.contribute.new_family``: its name and model-type checks, its markers, its parse check): the
closest family's files as the template (the Coverage page's match, ``site/coverage.py``), then

- the module pointed at the model type's own transformers classes (import, ``build``, ``ENVOYS``) and at the module
  paths the survey found (``RENAME``), with the relations the survey found broken, and the chain link that broke,
  listed in a comment: what the person adding the family must still state;
- the YAML's ``tiny.class`` and ``tiny.config`` the survey's shrunk config (``shrink.py``: every dimension of a
  tensor a size of its own, as recipes require; its heads times head dim the hidden size, which a model whose
  output projection is hidden by hidden, as Helium's, needs), with the template's special token ids.

What only a person can supply keeps ``new --like``'s marker, which ``verify`` refuses: the docstring, ``lines``,
``group``, ``tagline``, ``tags``, the full-size configs with their source and the fields the page tabulates from
them, the notes.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from generator.contribute import check_model_type, check_new_name, new_family
from generator.facts.identity import MARKER
from generator.recipe.fields import FamilyYamlError

_COMMAND = "python -m generator new --from-survey"
#: a config's context length, by every name shrink.py sets it
POSITIONS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")


def surveyed(model_type: str) -> dict:
    """The survey's facts of ``model_type`` (cached); a model type it could not mount the generic parts on is refused."""
    from generator.survey.run import survey_all

    survey_all([model_type], progress=lambda line: None)
    facts = _row(model_type)
    if not facts["wraps"]:
        raise FamilyYamlError(_COMMAND, None, f"the survey could not mount the generic parts on {model_type!r} "
                              f"({facts['failure']}); start from a family by hand: new --like")
    return facts


def _row(model_type: str) -> dict:
    import json

    from generator.survey.run import survey_dir

    return json.loads((survey_dir() / f"{model_type}.json").read_text(encoding="utf-8"))["facts"]


def closest_family(facts: dict) -> str:
    """The family whose model type's survey row shares the most with ``facts`` (every family's row surveyed, cached)."""
    from generator.site.coverage import closest, features
    from generator.survey.run import model_types, pages, survey_all

    every = set(model_types())  # a multimodal family's text model type (qwen2_5_vl_text) has no row of its own
    paged = {t: family for t, family in pages().items() if t in every}
    survey_all(sorted(paged), progress=lambda line: None)
    rows = [(paged[t], features(row)) for t in paged if (row := _row(t))["wraps"] and t != facts["model_type"]]
    found = closest(facts, rows)
    return found[0] if found else "llama"


def new_from_survey(name: str, model_type: str | None = None, like: str | None = None) -> tuple[list, str]:
    """Write the family ``name`` from the survey of ``model_type`` (default: the name), from ``like``'s files
    (default: the closest family's); returns the files written and the family started from."""
    from generator.recipe.family import get_family
    from generator.survey.measure import build, model_class
    from generator.survey.tree import discover

    check_new_name(name)
    model_type = check_model_type(name if model_type is None else model_type)
    facts = surveyed(model_type)
    like = like or closest_family(facts)
    model = build(model_type)
    cls = model_class(model_type)
    template = get_family(like)
    edit = _Edit(model_type, like, template.tiny, cls, model, discover(model).rename, facts)
    return new_family(name, like, model_type, edit=edit), like


class _Edit:
    """The rewrite of ``new --like``'s texts (``contribute.Edit``) with what the survey found."""

    def __init__(self, model_type: str, like: str, like_tiny: dict, cls: type, model: Any, rename: dict,
                 facts: dict) -> None:
        self.model_type, self.like, self.like_tiny, self.cls, self.facts = model_type, like, like_tiny, cls, facts
        self.mark = f"{MARKER} {like})"
        self.hf = cls.__module__  # transformers.models.<type>.modeling_<type>
        self.rename = _needed(rename, model)

    def __call__(self, module: str, yaml_text: str, notes: str) -> tuple[str, str, str]:
        return self.module(module), self.yaml(yaml_text), notes

    # -- the module ------------------------------------------------------------------------------------------

    def module(self, text: str) -> str:
        import importlib

        hf = importlib.import_module(self.hf)
        package, _, leaf = self.hf.rpartition(".")
        like_prefix = self.like_tiny["class"].removesuffix("ForCausalLM")
        prefix = self.cls.__name__.removesuffix("ForCausalLM")
        text = re.sub(r"^from transformers\.models\.\S+ import modeling_\S+ as hf$",
                      lambda _: f"from {package} import {leaf} as hf", text, count=1, flags=re.M)

        def point(match: re.Match) -> str:
            new = prefix + match.group(1)[len(like_prefix):]
            return f"hf.{new}" if hasattr(hf, new) else match.group(0)

        lines = [re.sub(rf"\bhf\.({re.escape(like_prefix)}\w*)", point, line) for line in text.splitlines(True)]
        text = self._unmark("".join(lines), hf)
        text = self._rename(text)
        return self._still_to_state(text)

    def _unmark(self, text: str, hf: Any) -> str:
        """Drop the marker above a line now pointed at the model type's classes; mark a line naming a class its
        modeling module does not have (the template's own part: the person must name the family's)."""
        out: list[str] = []
        for line in text.splitlines(True):
            missing = [n for n in re.findall(r"\bhf\.(\w+)", line) if not hasattr(hf, n)]
            if out and self.mark in out[-1] and (line.startswith("from transformers.models.") or line.startswith(
                    "build = ")) and not missing:
                out.pop()
            if missing and not (out and self.mark in out[-1]):
                out.append(f"# {self.mark}: {self.hf} has no {', '.join(missing)}: name the family's own class\n")
            out.append(line)
        return "".join(out)

    def _rename(self, text: str) -> str:
        """``RENAME`` as the survey found the module paths (the template's statement replaced whole)."""
        from nncanon.parts.blocks.decoder import TEXT_RENAME

        node = next((n for n in ast.parse(text).body if isinstance(n, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == "RENAME" for t in n.targets)), None)
        if node is None:
            return text
        extra = {k: v for k, v in self.rename.items() if TEXT_RENAME.get(k) != v}
        spelled = ast.get_source_segment(text, node.value) or ""
        # the template's own spelling of the shared paths (decoder.TEXT_RENAME) needs no new import
        shared = spelled if re.fullmatch(r"(\w+\.)?TEXT_RENAME", spelled) else "TEXT_RENAME"
        if not extra and set(TEXT_RENAME.items()) <= set(self.rename.items()):
            value = shared
        else:
            key = lambda k: f"hf.{k.__name__}" if isinstance(k, type) else repr(k)  # noqa: E731
            body = ", ".join(f"{key(k)}: {v!r}" for k, v in extra.items())
            value = f"{{**{shared}, {body}}}" if set(TEXT_RENAME.items()) <= set(self.rename.items()) else \
                "{" + ", ".join(f"{key(k)}: {v!r}" for k, v in self.rename.items()) + "}"
        lines = text.splitlines(True)
        statement = f"RENAME = {value}  # the module paths the survey found on {self.model_type}'s tree\n"
        text = "".join(lines[:node.lineno - 1] + [statement] + lines[node.end_lineno:])
        if shared == "TEXT_RENAME" and "TEXT_RENAME" in value and not re.search(
                r"^\s+TEXT_RENAME,$|import .*\bTEXT_RENAME\b", text, re.M):
            text = text.replace("from ..core.model import StandardModel\n", "from ..core.model import StandardModel\n"
                                "from ..parts.blocks.decoder import TEXT_RENAME\n", 1)
        return text

    def _still_to_state(self, text: str) -> str:
        """The comment list of what the survey found broken, above ``FAMILY``."""
        broken = [f"# - {relation}: {why}" for relation, why in self.facts["relations"].items() if why is not None]
        if self.facts.get("chain"):
            broken.append(f"# - the chain of relations: {self.facts['chain']}")
        head = (f"# Relations still to state: what the survey of {self.model_type} found broken on the generic parts\n"
                "# (python -m generator survey; verify names each that still does not hold)")
        block = "\n".join([head, *broken] if broken else [f"{head}: none"]) + "\n"
        return re.sub(r"^FAMILY = ", lambda _: block + "FAMILY = ", text, count=1, flags=re.M)

    # -- the YAML --------------------------------------------------------------------------------------------

    def yaml(self, text: str) -> str:
        lines = text.splitlines(True)
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("tiny:"):
                while out and out[-1].startswith("#"):  # the template's words on its own sizes
                    out.pop()
                out.append(f"# The survey's tiny config of {self.model_type} (generator/survey/shrink.py): every "
                           "dimension a size of its own.\n")
            elif line.startswith("  class:") and out and self.mark in out[-1]:
                out[-1] = f"  class: {self.cls.__name__}\n"
                i += 1
                continue
            elif line.startswith("  config_fields:"):  # the template's fields: the person's configs may not have them
                out.append(f"  # {self.mark}: the config fields the page tabulates, each one the full-size configs "
                           "have\n")
            elif line.rstrip() == "  config:":
                out.append(line)
                out.extend(f"    {k}: {_flow(v)}\n" for k, v in self.config().items())
                i += 1
                while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                    i += 1
                continue
            out.append(line)
            i += 1
        return "".join(out)

    def config(self) -> dict[str, Any]:
        """The survey's shrunk config, with the template's special token ids (its tokenizer, which the new family
        keeps, puts its special tokens there) and its context length (the notes' prompts, a chat template's, run
        longer than the survey's six tokens)."""
        from transformers import CONFIG_MAPPING

        from generator.survey.shrink import shrunk_kwargs

        config = {k: v for k, v in shrunk_kwargs(CONFIG_MAPPING[self.model_type]).items() if v is not None}
        like = self.like_tiny["config"]
        kept = {k: v for k, v in like.items() if k.endswith("_token_id") or (k in POSITIONS and k in config)}
        return {**config, **kept}  # a token id the template has no say on keeps the survey's, inside the vocabulary


def _flow(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()


def _needed(rename: dict, model: Any) -> dict:
    """The survey's RENAME without its no-op entries: a class mounted under the name every instance already has."""
    paths = [(path, type(m)) for path, m in model.named_modules()]
    return {k: v for k, v in rename.items()
            if not (isinstance(k, type) and all(p.rsplit(".", 1)[-1] == v for p, c in paths if c is k))}
