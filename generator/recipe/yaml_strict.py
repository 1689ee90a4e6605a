"""Strict YAML for the hand-written family files: plain data, each key once, no anchors.

``load(text)`` is ``yaml.safe_load`` that also refuses

- anchors and aliases (``&a`` / ``*a``, and so ``<<`` merge keys): a few hundred bytes of nested
  aliases ("billion laughs") expand to billions of values once the data is copied or walked, and
  a value shared between two places is one a reader cannot see;
- a key given twice in one mapping (PyYAML silently keeps the last one).

Every problem raises :class:`StrictYamlError` with the 1-based line and a one-line message.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode


class StrictYamlError(ValueError):
    """A YAML text this loader refuses: ``line`` (1-based, or None) and a one-line ``message``."""

    def __init__(self, line: int | None, message: str):
        self.line, self.message = line, message
        super().__init__(f"line {line}: {message}" if line else message)


def _line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


def _refuse_anchor(event: Any) -> None:
    """An anchor or an alias, met by either parser: refused at its line."""
    if isinstance(event, yaml.events.AliasEvent) or getattr(event, "anchor", None) is not None:
        raise StrictYamlError(_line(event.start_mark), "YAML anchors and aliases are not allowed (write the value out)")


class _StrictMappings:
    """Each key once, no merge keys, plain keys: checked as a mapping is constructed (either parser's nodes)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict:
        if isinstance(node, MappingNode):
            seen: dict[Any, int | None] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise StrictYamlError(
                        _line(key_node.start_mark), "YAML merge keys ('<<') are not allowed (write the keys out)"
                    )
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    raise StrictYamlError(
                        _line(key_node.start_mark), "a mapping key must be a plain value, not a list or mapping"
                    ) from None
                if key in seen:
                    raise StrictYamlError(
                        _line(key_node.start_mark),
                        f"key {key!r} is given twice in one mapping (first on line {seen[key]}); keep one",
                    )
                seen[key] = _line(key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


class _StrictLoader(_StrictMappings, yaml.SafeLoader):
    """The pure-Python parser: refuses an anchor or alias as its node is composed."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        _refuse_anchor(self.peek_event())
        return super().compose_node(parent, index)


#: libyaml's parser, where PyYAML was built with it: composes in C (the pure-Python parser took 2.5 s for the 129
#: family files (libyaml 0.47 s), in every process that reads them all: the suite's workers, each generator command)
_StrictCLoader = type("_StrictCLoader", (_StrictMappings, yaml.CSafeLoader), {}) \
    if getattr(yaml, "__with_libyaml__", False) else None


def _parsed_in_c(text: str) -> Any:
    """The data by libyaml, refusing anchors and aliases from its events first (in document order, as the pure
    parser meets them); a YAMLError is left to the caller, which asks the pure parser for its message."""
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        _refuse_anchor(event)
    return yaml.load(text, Loader=_StrictCLoader)  # noqa: S506 - a CSafeLoader subclass


def _one_line(error: yaml.YAMLError) -> StrictYamlError:
    """PyYAML's multi-line message as one line: the problem, its context, where."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None)
    context = getattr(error, "context", None)
    if problem:
        text = f"{problem} ({context})" if context else problem
    else:
        text = " ".join(str(error).split())
    if mark is not None:
        text += f", column {mark.column + 1}"
    return StrictYamlError(_line(mark), f"invalid YAML: {text}")


def load(text: str) -> Any:
    """The data of a YAML text (one document), refusing anchors, aliases and repeated keys. A fresh copy each
    call: the parse of a text is kept (the pure-Python strict loader is slow, and a test session or a build
    loads every family YAML several times), the copy handed out is the caller's to change."""
    return copy.deepcopy(_parsed(text))


@functools.lru_cache(maxsize=512)
def _parsed(text: str, parser: str = "c") -> Any:
    """``parser`` "c": libyaml where PyYAML has it, the pure-Python parser where it does not or where libyaml finds
    the text invalid (its message is the one this module has always given); "python": the pure parser only."""
    if parser == "c" and _StrictCLoader is not None:
        try:
            return _parsed_in_c(text)
        except (yaml.YAMLError, ConstructorError):
            pass
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except StrictYamlError:
        raise
    except (yaml.YAMLError, ConstructorError) as error:
        raise _one_line(error) from None
