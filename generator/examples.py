"""The notes of a family page: parse them, evaluate their claims, run their code.

A family's notes are markdown files named by its YAML (paths relative to the YAML)::

    notes: qwen3_5_moe_text.notes.md             # 03 · what to know before you run
    vision_notes: qwen3_5_moe_text.vision.md     # the family's own vision notes
    shared_vision_notes: shared/qwen_vit.md      # the vision encoder's notes, shared by families
    saes: {markdown: ..., releases: [...]}       # the Sparse autoencoders section

(``notes`` and ``vision_notes`` default to ``<family>.notes.md`` and ``<family>.vision.md`` beside
the YAML when those exist; ``notes`` may also be a list of ``{title, slug?, markdown}``.)

A notes file is one note per ``## Title`` heading, optionally ``## Title {#slug}``. It may start
with a YAML front matter block (``---`` lines) holding ``title`` and ``line`` (the shared vision
notes' heading and line name), ``variants`` (the title of a section whose prose goes under the
variants table instead of being a note) and ``let`` (names for expressions, below).

**Expressions.** ``{{ expr }}`` (on one line) is a Python expression evaluated at build time; the
page shows its value. It sees the full-size checkpoints of the YAML's ``checkpoints:``, named by id
or by the id's tail (``"35B-A3B"``: the id whose name ends in ``-35B-A3B``, the first one listed
when several do; ``"3.6-35B-A3B"`` also names ``Qwen/Qwen3.6-35B-A3B``):

- ``cfg(c)``: the checkpoint's transformers config; ``cfg(c).text`` and ``cfg(c).vision`` are its
  text and vision configs, ``text(c)`` and ``vision(c)`` the same;
- ``count(kind, c)`` / ``blocks(kind, c)``: how many / which blocks have ``layer_types`` == kind;
- ``meta(c)``: the full-size model built on the meta device (``generator.checkpoints.meta_model``);
- ``token_id(token, c)``: a special token's id in the full-size tokenizer, from the config's
  ``eos_token_id`` (``<|endoftext|>``) and the order of the family's special tokens (the tiny
  tokenizer's), checked against every token id the config gives (image, video, vision start/end);
- ``ids()``: the checkpoint ids; ``tiny``: the tiny checkpoint's config (``tiny.text``, ``tiny.vision``);
- ``needing(words, host=None)``: the value names whose load condition mentions ``words``, on the
  tiny checkpoint's ``support()`` (hosts whose path contains ``host``);
- ``version(package)``: an installed package's version (``version("transformers")``);
- formatting: ``code(x)`` (`` `x` ``, a list joined "a, b and c"), ``join(xs)``, ``sci(1e7)`` (10⁷),
  ``mib(n)`` (bytes to MiB);
- the front matter's ``let`` names, each an expression over the above (lambdas are fine).

Forms: ``{{ expr }}`` shows the value (a bool is refused: a claim must say what it claims);
``{{ 30 == expr }}`` is a *checked literal*: it shows ``30`` and the build fails unless
``expr == 30`` (the literal side is shown as typed, so a reader sees the number in the source);
``{{ assert expr }}`` shows nothing and fails the build unless ``expr`` is true.

**Code.** Every ```` ```python ```` block runs at build time against the tiny checkpoint, the blocks of
one note in order in one namespace, with ``model`` (``nncanon.load(checkpoint,
task="image-text-to-text")``; the default text-generation load for a family with no image
processor), ``checkpoint``, ``prompt`` (a user message through the tokenizer's chat template,
``enable_thinking=False``; in the vision notes the message holds the two images), ``red`` and
``wide`` (PIL images whose patch grids divide into the 2 x 2 merge blocks; vision-language
families only), ``torch`` and ``nncanon``. Its ``assert`` statements and its lines ending in ``# True`` (an expression that
must be truthy) are the claims. A ```` ```python display ```` block is shown, not run. Expressions in
code are substituted before it runs; the page shows the code as written, expressions substituted.

A failing claim raises :class:`NoteError` naming the family, the note, the file and line, and the
claim. :func:`build_notes` returns the ``notes``, ``vision_notes`` and ``saes`` parts of the facts.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import linecache
import re
import tempfile
import tokenize
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from generator.family import Family, FamilyYamlError, _display, get_family

__all__ = ["NoteError", "Note", "build_notes", "parse_notes", "ExpressionContext", "render_expressions"]

#: the text of the user message ``prompt`` holds, and the vision notes' message around two images
PROMPT_TEXT = "The cat sat on the mat because it was warm."
VISION_PROMPT_TEXT = "Which of the two images is wider?"


# ---------------------------------------------------------------------------------------------
# errors


class NoteError(Exception):
    """A note whose claim does not hold, or that cannot be read: family, note, file:line, claim."""

    def __init__(
        self,
        family: str,
        note: str | None,
        file: str | Path | None,
        line: int | None,
        message: str,
        claim: str | None = None,
    ):
        self.family, self.note, self.line, self.claim, self.message = family, note, line, claim, message
        self.file = _display(file) if file is not None else None
        where = self.file or ""
        if where and line:
            where += f":{line}"
        head = f"{family}: note {note!r}" if note else f"{family}"
        text = f"{head} ({where})" if where else head
        text += f": {message}"
        if claim:
            text += f"\n    {claim}"
        super().__init__(text)


# ---------------------------------------------------------------------------------------------
# parsing a notes file


@dataclass
class Note:
    """One ``## Title`` section: its lines with their file line numbers."""

    title: str
    slug: str
    file: Path
    line: int  #: the heading's line
    lines: list[tuple[int, str]] = field(default_factory=list)


_HEADING = re.compile(r"^##\s+(?P<title>.+?)(?:\s+\{#(?P<slug>[A-Za-z0-9_-]+)\})?\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DEEP_HEADING = re.compile(r"^#{1,3}\s")


def slugify(title: str) -> str:
    """``The prompt and the chat template`` -> ``the-prompt-and-the-chat-template`` (apostrophes dropped)."""
    text = re.sub(r"['’`]", "", title.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "note"


def parse_notes(path: str | Path, family: str = "?", text: str | None = None) -> tuple[dict, list[Note]]:
    """Front matter (a dict) and the notes of a notes file."""
    path = Path(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise NoteError(
                family, None, path, None, f"cannot read the notes file: {error.strerror or error}"
            ) from None
    lines = text.splitlines()
    front: dict = {}
    start = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is None:
            raise NoteError(family, None, path, 1, "the front matter opened by '---' is never closed")
        try:
            front = yaml.safe_load("\n".join(lines[1:end])) or {}
        except yaml.YAMLError as error:
            raise NoteError(family, None, path, 1, f"invalid YAML in the front matter: {error}") from None
        if not isinstance(front, dict):
            raise NoteError(family, None, path, 1, "the front matter must be a mapping")
        unknown = sorted(set(front) - {"title", "line", "variants", "let"})
        if unknown:
            raise NoteError(
                family,
                None,
                path,
                1,
                f"unknown front matter key(s) {', '.join(unknown)} (allowed: title, line, variants, let)",
            )
        start = end + 1
    notes: list[Note] = []
    fence: str | None = None
    in_comment = False
    for index in range(start, len(lines)):
        number, line = index + 1, lines[index]
        fenced = _FENCE.match(line)
        if fence is None and not in_comment and (m := _HEADING.match(line)):
            title = m.group("title").strip()
            notes.append(Note(title, m.group("slug") or slugify(title), path, number))
            continue
        if fence is None and fenced:
            fence = fenced.group("fence")
        elif (
            fence is not None
            and fenced
            and fenced.group("fence").startswith(fence)
            and not fenced.group("info").strip()
        ):
            fence = None
        elif fence is None and not notes:
            # before the first note: blank lines and HTML comments only
            stripped = line.strip()
            if "<!--" in stripped:
                in_comment = "-->" not in stripped.split("<!--", 1)[1]
            elif in_comment:
                in_comment = "-->" not in stripped
            elif stripped:
                raise NoteError(
                    family,
                    None,
                    path,
                    number,
                    "text before the first '## Title' belongs to no note; "
                    "start a note with '## Title' (or put it in an <!-- comment -->)",
                )
            continue
        elif fence is None and _DEEP_HEADING.match(line):
            raise NoteError(
                family,
                notes[-1].title,
                path,
                number,
                "a '#' or '###' heading inside a note: the page gives each note a heading of its own "
                "('## Title' starts the next note); use '####' or plain text",
            )
        if notes:
            notes[-1].lines.append((number, line))
    if fence is not None:
        raise NoteError(
            family,
            notes[-1].title if notes else None,
            path,
            len(lines),
            f"a {fence} code block is never closed",
        )
    seen: dict[str, str] = {}
    for note in notes:
        if note.slug in seen:
            raise NoteError(
                family,
                note.title,
                path,
                note.line,
                f"slug {note.slug!r} is also note {seen[note.slug]!r}'s; give one an explicit '{{#slug}}'",
            )
        seen[note.slug] = note.title
    return front, notes


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
            from generator.checkpoints import meta_model

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


# ---------------------------------------------------------------------------------------------
# running a note's code


_TRUE = re.compile(r"#\s*True\b")
_CHECK = "__nncanon_true__"


class _FalseLine(Exception):
    def __init__(self, line: int, value: Any):
        super().__init__(line)
        self.line, self.value = line, value


def _check_true(value: Any, line: int) -> None:
    try:
        ok = bool(value)
    except Exception as error:  # noqa: BLE001 - a tensor of many values, say
        raise _FalseLine(line, f"not one truth value ({type(error).__name__}: {error})") from None
    if not ok:
        raise _FalseLine(line, value)


def _true_lines(source: str) -> list[int]:
    """1-based lines of ``source`` whose comment is ``# True...``."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and _TRUE.match(token.string):
            found.append(token.start[0])
    return found


def _char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8"))


def instrument(source: str) -> tuple[str, dict[int, str]]:
    """Wrap each ``expr  # True`` statement of ``source`` in a check; keep every line where it was.

    Returns the new source and, per checked line, its original text. Raises ValueError for a
    ``# True`` on a line that does not end an expression statement.
    """
    tree = ast.parse(source)
    ends = {node.end_lineno: node for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    lines = source.split("\n")
    originals: dict[int, str] = {}
    for number in _true_lines(source):
        node = ends.get(number)
        if node is None:
            raise ValueError(number)
        originals[number] = lines[number - 1]
        end = _char_col(lines[node.end_lineno - 1], node.end_col_offset)
        lines[node.end_lineno - 1] = (
            lines[node.end_lineno - 1][:end] + f", {number})" + lines[node.end_lineno - 1][end:]
        )
        start = _char_col(lines[node.lineno - 1], node.col_offset)
        lines[node.lineno - 1] = (
            lines[node.lineno - 1][:start] + f"{_CHECK}(" + lines[node.lineno - 1][start:]
        )
    return "\n".join(lines), originals


@dataclass
class Block:
    line: int  #: the first code line's file line
    code: list[str]  #: the code lines, expressions substituted
    run: bool


def _error_line(error: BaseException, filename: str) -> int | None:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        lines = [
            frame.lineno for frame in traceback.extract_tb(error.__traceback__) if frame.filename == filename
        ]
        if lines:
            return lines[-1]
        error = error.__cause__ or error.__context__
    return None


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    lines = text.splitlines()
    if len(lines) > 6:
        text = "\n".join(lines[:6]) + "\n    ..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# ---------------------------------------------------------------------------------------------
# one note: expressions, code, markdown


class NoteRunner:
    """Renders and runs the notes of one family against its tiny checkpoint."""

    def __init__(
        self,
        family: Family,
        context: ExpressionContext,
        namespace: dict[str, Any],
        log: Callable[[str], None] | None = None,
    ):
        self.family, self.context, self.namespace, self.log = family, context, namespace, log

    def error(
        self,
        note: Note | None,
        line: int | None,
        message: str,
        claim: str | None = None,
        file: Path | None = None,
    ) -> NoteError:
        return NoteError(
            self.family.family,
            note.title if note else None,
            file or (note.file if note else None),
            line,
            message,
            claim,
        )

    def render(self, note: Note, names: dict[str, Any]) -> tuple[list[str], list[Block]]:
        """The note's markdown lines (expressions substituted, fence flags dropped) and its code blocks."""
        out: list[str] = []
        blocks: list[Block] = []
        fence: str | None = None
        block: Block | None = None
        for number, line in note.lines:

            def fail(column: int, claim: str, why: str, number=number) -> NoteError:
                return self.error(note, number, why, claim)

            fenced = _FENCE.match(line)
            if fence is None and fenced:
                fence = fenced.group("fence")
                words = fenced.group("info").split()
                language = words[0] if words else ""
                flags = set(words[1:])
                unknown = flags - {"display"}
                if unknown:
                    raise self.error(
                        note,
                        number,
                        f"unknown code block flag(s) {', '.join(sorted(unknown))} "
                        "(```python display: shown, not run)",
                    )
                if language == "python":
                    block = Block(number + 1, [], run="display" not in flags)
                out.append(f"{fenced.group('indent')}{fence}{language}")
                continue
            if (
                fence is not None
                and fenced
                and fenced.group("fence").startswith(fence)
                and not fenced.group("info").strip()
            ):
                fence = None
                if block is not None:
                    blocks.append(block)
                    block = None
                out.append(line)
                continue
            rendered = render_expressions(line, names, fail)
            if block is not None:
                block.code.append(rendered)
            elif fence is None and line.strip() and not rendered.strip():
                continue  # a line of silent checks only
            out.append(rendered)
        while out and not out[0].strip():
            out.pop(0)
        while out and not out[-1].strip():
            out.pop()
        markdown = "\n".join(out)
        markdown = re.sub(r"[ \t]+\n", "\n", markdown)
        return markdown.split("\n"), blocks

    def run(self, note: Note, blocks: list[Block], extra: dict[str, Any] | None = None) -> None:
        """Run the note's python blocks in order, in one namespace, checking its claims."""
        runnable = [b for b in blocks if b.run]
        if not runnable:
            return
        last = max(b.line + len(b.code) for b in runnable)
        virtual = [""] * last
        for b in runnable:
            for offset, text in enumerate(b.code):
                virtual[b.line - 1 + offset] = text
        source = "\n".join(virtual) + "\n"
        try:
            source, originals = instrument(source)
        except SyntaxError as error:
            raise self.error(
                note,
                error.lineno,
                f"the code does not parse: {error.msg}",
                virtual[error.lineno - 1].strip() if error.lineno else None,
            ) from None
        except ValueError as error:
            line = error.args[0]
            raise self.error(
                note,
                line,
                "a '# True' comment on a line that does not end an expression statement",
                virtual[line - 1].strip(),
            ) from None
        digest = hashlib.sha256(f"{note.file}\0{note.title}\0{source}".encode()).hexdigest()[:12]
        filename = f"<nncanon note {self.family.family}/{note.file.name}:{note.line} {digest}>"
        # nnsight reads a trace's body back from linecache: register the code it runs
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        namespace = {**self.namespace, **(extra or {}), _CHECK: _check_true, "__name__": "__nncanon_note__"}
        tree = ast.parse(source)
        from nncanon import kernels

        family = getattr(self.namespace.get("model"), "family", None)
        route = kernels.route(family) if family else None
        try:
            for statement in tree.body:
                compiled = compile(
                    ast.Module([statement], []), filename, "exec", dont_inherit=True, optimize=0
                )
                try:
                    exec(compiled, namespace)
                except _FalseLine as failed:
                    text = originals.get(failed.line, virtual[failed.line - 1]).strip()
                    value = failed.value if isinstance(failed.value, str) else f"is {_short(failed.value)}"
                    raise self.error(
                        note, failed.line, f"a '# True' line does not hold: the expression {value}", text
                    ) from None
                except NoteError:
                    raise
                except AssertionError as error:
                    line = _error_line(error, filename) or statement.lineno
                    raise self.error(
                        note, line, f"an assert fails: {_describe(error)}", virtual[line - 1].strip()
                    ) from error
                except Exception as error:  # noqa: BLE001 - any failure of the code is the note's
                    line = _error_line(error, filename) or statement.lineno
                    raise self.error(
                        note, line, f"the code raises {_describe(error)}", virtual[line - 1].strip()
                    ) from error
        finally:
            if family and kernels.route(family) != route:
                kernels.route_kernels(family, route)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 200 else text[:200] + "..."


# ---------------------------------------------------------------------------------------------
# the family's sources


def _relative(family: Family, value: str, field_name: str) -> Path:
    path = (Path(family.path).parent / value).resolve()
    if not path.is_file():
        raise FamilyYamlError(
            family.path, field_name, f"no notes file {value!r} (looked for {_display(path)})"
        )
    return path


def _notes_source(family: Family, key: str, default: str | None) -> Path | list | None:
    value = family.get(key)
    if value is None:
        if default is None:
            return None
        path = Path(family.path).parent / default
        return path.resolve() if path.is_file() else None
    if isinstance(value, str):
        return _relative(family, value, key)
    if key == "notes" and isinstance(value, list):
        return value
    raise FamilyYamlError(
        family.path, key, f"expected a path to a markdown file (relative to the YAML), got {value!r}"
    )


def _inline_notes(family: Family, items: list) -> list[Note]:
    """Notes given in the YAML itself: ``[{title, slug?, markdown}]``."""
    text = Path(family.path).read_text(encoding="utf-8").splitlines()
    notes = []
    for i, item in enumerate(items):
        where = f"notes[{i}]"
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("title"), str)
            or not isinstance(item.get("markdown"), str)
        ):
            raise FamilyYamlError(
                family.path, where, "expected a mapping with 'title' and 'markdown' strings"
            )
        unknown = sorted(set(item) - {"title", "slug", "markdown"})
        if unknown:
            raise FamilyYamlError(
                family.path, f"{where}.{unknown[0]}", "unknown field (allowed: title, slug, markdown)"
            )
        first = _yaml_line(text, item["markdown"])
        lines = [(first + n if first else 0, line) for n, line in enumerate(item["markdown"].splitlines())]
        title = item["title"]
        notes.append(Note(title, item.get("slug") or slugify(title), Path(family.path), first or 0, lines))
    return notes


def _yaml_line(text: list[str], block: str) -> int | None:
    """The file line where a block scalar's first non-blank line sits."""
    first = next((line.strip() for line in block.splitlines() if line.strip()), None)
    if first is None:
        return None
    offset = next((n for n, line in enumerate(block.splitlines()) if line.strip()), 0)
    for number, line in enumerate(text, 1):
        if line.strip() == first:
            return number - offset
    return None


# ---------------------------------------------------------------------------------------------
# the prompts and images the code uses


def chat_prompt(tokenizer: Any, images: int = 0) -> str:
    """A user message through the tokenizer's chat template, thinking off; ``images`` image parts first."""
    if images:
        content: Any = [{"type": "image"} for _ in range(images)] + [
            {"type": "text", "text": VISION_PROMPT_TEXT}
        ]
    else:
        content = PROMPT_TEXT
    messages = [{"role": "user", "content": content}]
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )


def example_images(processor: Any) -> dict[str, Any]:
    """``red``: a red square; ``wide``: a wide image of another size (left blue, right green).

    Both sides are multiples of patch_size * merge_size, so the processor keeps them as they are
    and every grid divides into the merger's blocks; checked against the processor's grids.
    """
    from PIL import Image

    image_processor = processor.image_processor
    unit = image_processor.patch_size * image_processor.merge_size
    red = Image.new("RGB", (2 * unit, 2 * unit), (220, 30, 30))
    wide = Image.new("RGB", (4 * unit, 2 * unit), (30, 60, 200))
    wide.paste(Image.new("RGB", (2 * unit, 2 * unit), (40, 180, 70)), (2 * unit, 0))
    grids = image_processor(images=[red, wide], return_tensors="pt")["image_grid_thw"].tolist()
    merge = image_processor.merge_size
    expected = [[1, 2 * merge, 2 * merge], [1, 2 * merge, 4 * merge]]
    if grids != expected:
        raise RuntimeError(
            f"the example images' patch grids are {grids}, expected {expected}: the processor "
            "resized them; make them multiples of patch_size * merge_size within its pixel bounds"
        )
    return {"red": red, "wide": wide}


# ---------------------------------------------------------------------------------------------
# the SAE section


_RELEASE_NAME = re.compile(r"-W(?P<width>\d+)K-L0_(?P<k>\d+)$")
RELEASE_FIELDS = ("id", "checkpoint", "features", "k", "layers", "hook")


def _releases(family: Family, context: ExpressionContext, support: list) -> list[dict[str, Any]]:
    raw = family.saes
    items = raw.get("releases", [])
    if not isinstance(items, list) or not items:
        raise FamilyYamlError(family.path, "saes.releases", "expected a non-empty list of releases")
    hooks = {f"{row.host}.{row.name}" for row in support}
    out = []
    for i, item in enumerate(items):
        where = f"saes.releases[{i}]"
        if not isinstance(item, dict):
            raise FamilyYamlError(family.path, where, f"expected a mapping, got {item!r}")
        unknown = sorted(set(item) - set(RELEASE_FIELDS))
        if unknown:
            raise FamilyYamlError(
                family.path, f"{where}.{unknown[0]}", f"unknown field (allowed: {', '.join(RELEASE_FIELDS)})"
            )
        for name, kind in (("id", str), ("checkpoint", str), ("features", int), ("k", int)):
            if name not in item:
                raise FamilyYamlError(family.path, f"{where}.{name}", "missing (required)")
            if not isinstance(item[name], kind) or isinstance(item[name], bool):
                raise FamilyYamlError(
                    family.path,
                    f"{where}.{name}",
                    f"expected {'a string' if kind is str else 'an integer'}, got {item[name]!r}",
                )
        try:
            checkpoint = context.resolve(item["checkpoint"])
        except KeyError as error:
            raise FamilyYamlError(family.path, f"{where}.checkpoint", str(error.args[0])) from None
        layers = context.text(checkpoint).num_hidden_layers
        span = f"0-{layers - 1}"
        given = item.get("layers", span)
        if str(given) != span:
            raise FamilyYamlError(
                family.path, f"{where}.layers", f"claims {given!r}, but {checkpoint} has blocks {span}"
            )
        named = _RELEASE_NAME.search(item["id"])
        if named and (int(named["width"]) * 1024 != item["features"] or int(named["k"]) != item["k"]):
            raise FamilyYamlError(
                family.path,
                where,
                f"{item['id']} names {int(named['width']) * 1024} features and "
                f"k {named['k']}, but the entry says {item['features']} and {item['k']}",
            )
        hook = item.get("hook", "model.layers[i].layer_output")
        if hook not in hooks:
            raise FamilyYamlError(
                family.path,
                f"{where}.hook",
                f"{hook!r} is not a value of this family "
                "(a host path and a value name, e.g. model.layers[i].layer_output)",
            )
        if item["k"] > item["features"]:
            raise FamilyYamlError(
                family.path, f"{where}.k", f"k = {item['k']} exceeds the {item['features']} features"
            )
        out.append(
            {
                "id": item["id"],
                "checkpoint": checkpoint,
                "features": item["features"],
                "k": item["k"],
                "layers": span,
                "hook": hook,
            }
        )
    return out


def verify_sae(
    model: Any, prompt: str, release: dict[str, Any], directory: Path, context: ExpressionContext
) -> str:
    """Build a tiny TopK SAE per block of the tiny checkpoint in the release's format, load each, encode
    the block's ``layer_output``, check k nonzeros per token and the decoded shape; say what was checked."""
    import torch

    from nncanon.sae import TopKSAE, layer_file

    d = model.hidden_size
    expansion = release["features"] // context.text(release["checkpoint"]).hidden_size
    d_sae = expansion * d
    k = min(release["k"], d_sae // 2)
    reads: list = []  # filled inside the trace (a with body runs as nnsight's own code)
    with model.trace(prompt):
        for layer in model.layers:
            reads.append(layer.layer_output.save())
    for i, resid in enumerate(reads):
        TopKSAE.random(d, d_sae, k, seed=i).save(layer_file(directory, i))
        sae = TopKSAE.load(layer_file(directory, i))
        if (sae.d, sae.d_sae, sae.k) != (d, d_sae, k):
            raise AssertionError(f"block {i}: the SAE loaded as d={sae.d}, d_sae={sae.d_sae}, k={sae.k}")
        features = sae.encode(resid)
        per_token = (features != 0).sum(-1)
        if features.shape != (*resid.shape[:-1], d_sae) or not torch.equal(
            per_token, torch.full_like(per_token, k)
        ):
            raise AssertionError(
                f"block {i}: encode gave {list(features.shape)} with {per_token.tolist()} nonzero "
                f"features per token, not {k}"
            )
        rebuilt = sae.decode(features)
        if rebuilt.shape != resid.shape:
            raise AssertionError(f"block {i}: decode gave {list(rebuilt.shape)}, not {list(resid.shape)}")
        torch.testing.assert_close(rebuilt, features @ sae.W_dec.T + sae.b_dec)
    shape = "[batch, seq, d]"
    return (
        f"Checked at build time on the tiny checkpoint: for each of its {len(reads)} blocks a TopK SAE written "
        f"in this layer<i>.sae.pt format ({expansion} times as wide as the stream, as "
        f"{release['id'].split('/')[-1]} is: d = {d}, d_sae = {d_sae}, k = {k}) loads with "
        f"nncanon.sae.TopKSAE.load, encodes the block's {release['hook']} to exactly k nonzero features "
        f"per token and decodes them back to {shape}."
    )


# ---------------------------------------------------------------------------------------------
# the whole


def build_notes(
    family: str | Path | Family,
    tiny_checkpoint_dir: str | Path,
    *,
    model: Any = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Render, check and run a family's notes, vision notes and SAE section.

    Returns ``{"notes": [...], "vision_notes": {...} | None, "saes": {...} | None}`` in the facts
    JSON's shapes (``vision_notes.shared.variants`` holds only the variants' prose, under
    ``markdown``, when the shared notes have one). ``model``: an ``image-text-to-text`` load of
    ``tiny_checkpoint_dir`` to reuse (loaded here when None). Raises `NoteError` on the first claim
    that does not hold.
    """
    import torch

    # The tiny model's ops are too small to share among threads: one thread is faster, and far
    # faster on a busy machine, where a team of threads waits on its slowest member at every op.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _build_notes(family, tiny_checkpoint_dir, model, log)
    finally:
        torch.set_num_threads(threads)


def _build_notes(
    family: str | Path | Family,
    tiny_checkpoint_dir: str | Path,
    model: Any,
    log: Callable[[str], None] | None,
) -> dict[str, Any]:
    import torch

    import nncanon

    fam = get_family(family)
    checkpoint = Path(tiny_checkpoint_dir)
    say = log or (lambda message: None)
    sources = {
        "notes": _notes_source(fam, "notes", f"{fam.family}.notes.md"),
        "vision": _notes_source(fam, "vision_notes", f"{fam.family}.vision.md"),
        "shared": _notes_source(fam, "shared_vision_notes", None),
    }
    if model is None:
        task = "image-text-to-text" if "processor" in fam.tiny else "text-generation"
        say(f"loading the tiny checkpoint ({task})")
        model = nncanon.load(checkpoint, task=task)
    processor = getattr(model, "processor", None)
    if processor is None and "processor" in fam.tiny:
        raise ValueError(
            "build_notes needs the image-text-to-text load of the tiny checkpoint (model.processor)"
        )
    support = list(model.support())
    context = ExpressionContext(fam, model._module.config, support)
    text_prompt = chat_prompt(model.tokenizer)
    images = example_images(processor) if processor is not None else {}  # text-only families: no images
    base = {
        "model": model,
        "checkpoint": checkpoint,
        "prompt": text_prompt,
        "torch": torch,
        "nncanon": nncanon,
        **images,
    }
    runner = NoteRunner(fam, context, base, log)

    def run_file(
        source: Path | list | None, extra: dict[str, Any] | None = None
    ) -> tuple[dict, list[dict], str | None]:
        if source is None:
            return {}, [], None
        if isinstance(source, list):
            front, notes = {}, _inline_notes(fam, source)
        else:
            front, notes = parse_notes(source, fam.family)
        try:
            names = context.namespace(
                front.get("let"), _display(source) if isinstance(source, Path) else "notes"
            )
        except ClaimFailed as error:
            raise NoteError(
                fam.family, None, source if isinstance(source, Path) else fam.path, 1, str(error)
            ) from None
        variants_title = front.get("variants")
        out, variants = [], None
        for note in notes:
            say(f"note: {note.title}")
            lines, blocks = runner.render(note, names)
            runner.run(note, blocks, extra)
            if variants_title and note.title == variants_title:
                variants = "\n".join(lines)
                continue
            out.append({"title": note.title, "slug": note.slug, "markdown": "\n".join(lines)})
        if variants_title and variants is None:
            raise NoteError(
                fam.family, None, source, 1, f"the front matter's variants: {variants_title!r} names no note"
            )
        for key in ("title", "line"):
            if key in front:
                front[key] = render_expressions(
                    str(front[key]),
                    names,
                    lambda c, claim, why: NoteError(fam.family, None, source, 1, why, claim),
                )
        return front, out, variants

    _, notes, _ = run_file(sources["notes"])
    vision_notes = None
    if sources["vision"] is not None or sources["shared"] is not None:
        vision_extra = {"prompt": chat_prompt(model.tokenizer, images=2)}
        shared = None
        if sources["shared"] is not None:
            front, shared_notes, variants = run_file(sources["shared"], vision_extra)
            for key in ("title", "line"):
                if key not in front:
                    raise NoteError(
                        fam.family,
                        None,
                        sources["shared"],
                        1,
                        f"the shared vision notes' front matter needs '{key}'",
                    )
            shared = {"title": front["title"], "line": front["line"], "notes": shared_notes}
            if variants:
                shared["variants"] = {"markdown": variants}
        own = None
        if sources["vision"] is not None:
            front, own_notes, _ = run_file(sources["vision"], vision_extra)
            own = {"title": front.get("title", fam.lines[0]), "notes": own_notes}
        vision_notes = {"shared": shared, "family": own}

    saes = None
    if fam.saes is not None:
        if not isinstance(fam.saes, dict):
            raise FamilyYamlError(
                fam.path, "saes", f"expected a mapping with markdown and releases, got {fam.saes!r}"
            )
        unknown = sorted(set(fam.saes) - {"markdown", "releases"})
        if unknown:
            raise FamilyYamlError(
                fam.path, f"saes.{unknown[0]}", "unknown field (allowed: markdown, releases)"
            )
        say("sparse autoencoders")
        releases = _releases(fam, context, support)
        markdown = fam.saes.get("markdown", "")
        if not isinstance(markdown, str):
            raise FamilyYamlError(fam.path, "saes.markdown", f"expected markdown text, got {markdown!r}")
        yaml_text = Path(fam.path).read_text(encoding="utf-8").splitlines()
        first = _yaml_line(yaml_text, markdown) or 0
        note = Note(
            "Sparse autoencoders",
            "sparse-autoencoders",
            Path(fam.path),
            first,
            [(first + n if first else 0, line) for n, line in enumerate(markdown.splitlines())],
        )
        with tempfile.TemporaryDirectory(prefix="nncanon-sae-") as tmp:
            directory = Path(tmp)
            try:
                verified = verify_sae(model, text_prompt, releases[0], directory, context)
            except Exception as error:  # noqa: BLE001 - reported as the section's failure
                raise NoteError(
                    fam.family, note.title, fam.path, first, f"the SAE check fails: {_describe(error)}"
                ) from error
            lines, blocks = runner.render(note, context.namespace())
            runner.run(note, blocks, {"directory": directory})
        saes = {
            "markdown": "\n".join(lines),
            "releases": [{k: r[k] for k in ("id", "features", "k", "layers", "hook")} for r in releases],
            "verified": verified,
        }
    return {"notes": notes, "vision_notes": vision_notes, "saes": saes}
