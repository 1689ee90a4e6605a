"""``{{ }}`` expressions of the notes: what they see (:class:`ExpressionContext`), how they are
evaluated and checked (:func:`evaluate`) and how their values read on the page (:func:`fmt`).

The forms and names are described in :mod:`generator.notes.examples`.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable
from typing import Any

from generator.recipe.family import Family
from generator.recipe.fields import _display

# ---------------------------------------------------------------------------------------------
# expressions


_EXPR = re.compile(r"\{\{(?P<body>.*?)\}\}")
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_SAFE_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "abs",
        "all",
        "any",
        "bool",
        "dict",
        "divmod",
        "enumerate",
        "filter",
        "float",
        "getattr",
        "hasattr",
        "int",
        "isinstance",
        "len",
        "list",
        "map",
        "max",
        "min",
        "pow",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
        "None",
        "True",
        "False",
    )
}


class ClaimFailed(Exception):
    """An expression that does not hold; ``str`` says what was claimed and what is."""


class ConfigView:
    """A transformers config with ``.text`` and ``.vision`` for its text and vision configs."""

    def __init__(self, config: Any, name: str):
        self._config, self._name = config, name

    @property
    def text(self) -> Any:
        return self._config.get_text_config()

    @property
    def vision(self) -> Any:
        vision = getattr(self._config, "vision_config", None)
        if vision is None:
            raise AttributeError(f"{self._name} has no vision_config")
        return vision

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)

    def __repr__(self) -> str:
        return f"<config of {self._name}>"


class ExpressionContext:
    """What ``{{ }}`` expressions see: the family's full-size checkpoints, the tiny one, and helpers."""

    def __init__(self, family: Family, tiny_config: Any = None, support: list | None = None):
        self.family = family
        self._configs: dict[str, Any] = {}
        self._meta: dict[str, Any] = {}
        self._tiny = tiny_config
        self._support = support or []
        self.names: dict[str, Any] = {
            "cfg": self.cfg,
            "text": self.text,
            "vision": self.vision,
            "count": self.count,
            "blocks": self.blocks,
            "meta": self.meta,
            "token_id": self.token_id,
            "ids": self.ids,
            "needing": self.needing,
            "code": code,
            "join": join,
            "sci": sci,
            "mib": mib,
            "version": version,
        }
        if tiny_config is not None:
            self.names["tiny"] = ConfigView(tiny_config, "the tiny checkpoint")

    # -- checkpoints ---------------------------------------------------------------------

    def ids(self) -> list[str]:
        return list(self.family.checkpoint_ids)

    def resolve(self, checkpoint: str) -> str:
        """A checkpoint id from an id or the tail of one (the first listed when several match)."""
        ids = self.family.checkpoint_ids
        if checkpoint in ids:
            return checkpoint
        for cid in ids:
            name = cid.split("/")[-1]
            if (
                name == checkpoint
                or name.endswith("-" + checkpoint)
                or (name.endswith(checkpoint) and name[: -len(checkpoint)].isalpha())
            ):
                return cid
        raise KeyError(
            f"no checkpoint {checkpoint!r} in {_display(self.family.path)} (checkpoints: {', '.join(ids)})"
        )

    def cfg(self, checkpoint: str) -> ConfigView:
        cid = self.resolve(checkpoint)
        if cid not in self._configs:
            import transformers

            raw = self.family.checkpoint_config(cid)
            kwargs = {k: v for k, v in raw.items() if k != "model_type"}
            self._configs[cid] = transformers.AutoConfig.for_model(raw["model_type"], **kwargs)
        return ConfigView(self._configs[cid], cid)

    def text(self, checkpoint: str) -> Any:
        return self.cfg(checkpoint).text

    def vision(self, checkpoint: str) -> Any:
        return self.cfg(checkpoint).vision

    def count(self, kind: str, checkpoint: str) -> int:
        return len(self.blocks(kind, checkpoint))

    def blocks(self, kind: str, checkpoint: str) -> list[int]:
        types = list(self.text(checkpoint).layer_types)
        if kind not in types:
            raise KeyError(
                f"no block of kind {kind!r} on {self.resolve(checkpoint)} (kinds: {', '.join(sorted(set(types)))})"
            )
        return [i for i, t in enumerate(types) if t == kind]

    def meta(self, checkpoint: str) -> Any:
        cid = self.resolve(checkpoint)
        if cid not in self._meta:
            from generator.checkpoint.meta_models import meta_model

            self._meta[cid] = meta_model(self.family, cid)
        return self._meta[cid]

    def token_id(self, token: str, checkpoint: str) -> int:
        """The full-size id of a special token: the config's eos id plus the token's offset among the
        family's special tokens (their order is the real tokenizer's), checked against the config."""
        specials = self.family.tiny["tokenizer"]["special_tokens"]
        anchor = "<|endoftext|>"
        if token not in specials:
            raise KeyError(f"{token!r} is not among the family's special tokens ({', '.join(specials)})")
        config = self.cfg(checkpoint)
        eos = config.text.eos_token_id
        eos = eos[0] if isinstance(eos, list) else eos

        def full(name: str) -> int:
            return eos + specials[name] - specials[anchor]

        for attr, name in (
            ("image_token_id", "<|image_pad|>"),
            ("video_token_id", "<|video_pad|>"),
            ("vision_start_token_id", "<|vision_start|>"),
            ("vision_end_token_id", "<|vision_end|>"),
        ):
            given = getattr(config, attr, None)
            if given is not None and name in specials and given != full(name):
                raise ClaimFailed(
                    f"the special tokens' order does not match {self.resolve(checkpoint)}: its {attr} "
                    f"is {given}, the order gives {name} the id {full(name)}"
                )
        return full(token)

    # -- the tiny checkpoint --------------------------------------------------------------

    def needing(self, words: str, host: str | None = None) -> list[str]:
        """Value names (sorted as support() lists them) whose condition mentions ``words``."""
        names = [
            row.name
            for row in self._support
            if row.conditional
            and row.condition
            and words in row.condition
            and (host is None or host in row.host)
        ]
        if not names:
            raise ClaimFailed(
                f"no value's condition mentions {words!r}" + (f" on a host like {host!r}" if host else "")
            )
        return list(dict.fromkeys(names))

    # -- evaluation ------------------------------------------------------------------------

    def namespace(self, lets: dict[str, str] | None = None, where: str = "let") -> dict[str, Any]:
        """The globals expressions run in: the helpers, then ``lets`` (a front matter's ``let``), in order.

        One dict, so a ``let`` lambda sees every name, later lets included."""
        names: dict[str, Any] = {"__builtins__": _SAFE_BUILTINS, **self.names}
        for name, source in (lets or {}).items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ClaimFailed(f"{where}: let name {name!r} is not an identifier")
            try:
                names[name] = _eval(str(source), names)
            except Exception as error:  # noqa: BLE001 - reported with the name
                raise ClaimFailed(
                    f"{where}: let {name} = {source}: {type(error).__name__}: {error}"
                ) from error
        return names


def _eval(source: str, names: dict[str, Any]) -> Any:
    """Evaluate with ``names`` as globals (so comprehensions and lambdas see them)."""
    if "__builtins__" not in names:
        names = {"__builtins__": _SAFE_BUILTINS, **names}
    return eval(compile(source, "<expression>", "eval", dont_inherit=True), names)


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def fmt(value: Any) -> str:
    """How a value reads on the page: ints plainly, integral floats as ints, lists in brackets."""
    if isinstance(value, bool):
        raise ClaimFailed(
            f"the expression is {value}, a truth value: write the claim as "
            "'{{ literal == expression }}' or '{{ assert expression }}'"
        )
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if value is None:
        return "None"
    return str(value)


def code(value: Any) -> str:
    """`` `x` ``; a list as "`a`, `b` and `c`"."""
    if isinstance(value, (list, tuple)):
        return join([f"`{v}`" for v in value])
    return f"`{value}`"


def join(values: Any, last: str = "and") -> str:
    """ "a, b and c"."""
    items = [fmt(v) for v in values]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def sci(value: Any) -> str:
    """A power of ten as 10⁷."""
    exponent = len(str(int(value))) - 1
    if int(value) != 10**exponent or value != int(value):
        raise ClaimFailed(f"sci({value!r}): not a power of ten")
    return "10" + str(exponent).translate(_SUPERSCRIPT)


def version(package: str) -> str:
    """The installed version of a package (the pinned ones: torch, transformers, nnsight)."""
    from importlib.metadata import version as installed

    return installed(package)


def mib(size: int) -> float:
    """Bytes in MiB."""
    return size / 2**20


def evaluate(body: str, names: dict[str, Any]) -> str:
    """The page text of one ``{{ body }}``; raises ClaimFailed when it does not hold."""
    body = body.strip()
    if re.match(r"assert\b", body):
        try:
            statement = ast.parse(body, mode="exec").body[0]
        except SyntaxError as error:
            raise ClaimFailed(f"not an assert statement: {error.msg}") from None
        if not isinstance(statement, ast.Assert):
            raise ClaimFailed("not an assert statement")
        value = _eval(ast.get_source_segment(body, statement.test), names)
        if not value:
            why = f" ({_eval(ast.get_source_segment(body, statement.msg), names)})" if statement.msg else ""
            raise ClaimFailed(f"{ast.get_source_segment(body, statement.test)} is false{why}")
        return ""
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError as error:
        raise ClaimFailed(f"not a Python expression: {error.msg}") from None
    if (
        isinstance(tree, ast.Compare)
        and len(tree.ops) == 1
        and isinstance(tree.ops[0], ast.Eq)
        and (_is_literal(tree.left) or _is_literal(tree.comparators[0]))
    ):
        literal, other = (
            (tree.left, tree.comparators[0]) if _is_literal(tree.left) else (tree.comparators[0], tree.left)
        )
        claimed = ast.literal_eval(literal)
        actual = _eval(ast.get_source_segment(body, other), names)
        if claimed != actual or type(claimed) is bool and type(actual) is not bool:
            raise ClaimFailed(
                f"claims {ast.get_source_segment(body, literal)}, but "
                f"{ast.get_source_segment(body, other)} is {actual!r}"
            )
        return ast.get_source_segment(body, literal)
    return fmt(_eval(body, names))


def render_expressions(text: str, names: dict[str, Any], fail: Callable[[int, str, str], Exception]) -> str:
    """Substitute every ``{{ }}`` of ``text`` (one line); ``fail(column, claim, why)`` makes the error."""

    def substitute(match: re.Match) -> str:
        try:
            return evaluate(match.group("body"), names)
        except ClaimFailed as error:
            raise fail(match.start(), match.group(0), str(error)) from None
        except Exception as error:  # noqa: BLE001 - any failure of an expression is the note's
            raise fail(match.start(), match.group(0), f"{type(error).__name__}: {error}") from error

    parts, last = [], 0
    for match in _EXPR.finditer(text):
        before = text[last : match.start()]
        value = substitute(match)
        if not value and before.endswith(" "):
            before = before[:-1]  # a silent check takes its leading space with it
        parts += [before, value]
        last = match.end()
    out = "".join(parts) + text[last:]
    if "{{" in out or "}}" in out:
        raise fail(
            out.find("{{") if "{{" in out else out.find("}}"), text.strip(), "an unbalanced '{{' or '}}'"
        )
    return out
