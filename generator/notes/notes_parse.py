"""Notes files: the ``## Title`` sections of a family's notes markdown, and where the YAML says they are.

The syntax is described in :mod:`generator.notes.examples`. :func:`parse_notes` splits a notes file
into its front matter and its :class:`Note`\ s; :func:`notes_source` finds a family's notes file
(or its inline notes) from the YAML. Every problem raises :class:`NoteError` (one note, a file
and line) or :class:`~generator.recipe.family.FamilyYamlError` (a YAML field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError, _display

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
        text += f": {_one_line(message)}"
        if claim:
            text += f" (in: {_one_line(claim)})"
        super().__init__(text)


def _one_line(text: str) -> str:
    """A multi-line message (an assert_close report, say) on one line, its lines joined by ' / '."""
    return " / ".join(line.strip() for line in str(text).splitlines() if line.strip())


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


_PAGE_IDS = re.compile(r"\{ #([a-z0-9-]+) \}")
_ID_PREFIXES = ("block-", "host-", "v-", "nc-", "vision-notes-")  # ids the page template makes from names


def slug_taken(slug: str) -> str | None:
    """Why a note's id would repeat one of its family page's own ids (``support``, ``config``...), or None."""
    template = Path(__file__).resolve().parents[2] / "site_templates" / "family.md.j2"
    ids = set(_PAGE_IDS.findall(template.read_text(encoding="utf-8")))
    if slug in ids or slug.startswith(_ID_PREFIXES):
        return (f"its id {slug!r} is also one of the page's own (a section or a table row); give the note "
                f"an explicit id, e.g. '## Title {{#note-{slug}}}'")
    return None


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
        if slug_taken(note.slug):
            raise NoteError(family, note.title, path, note.line, slug_taken(note.slug))
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
# the family's sources


def _relative(family: Family, value: str, field_name: str) -> Path:
    path = (Path(family.path).parent / value).resolve()
    if not path.is_file():
        raise FamilyYamlError(
            family.path, field_name, f"no notes file {value!r} (looked for {_display(path)}); write it or fix the path"
        )
    return _inside(family, path, field_name, value)


def _inside(family: Family, path: Path, field_name: str, value: str) -> Path:
    # a symlink out of families/ would publish (and run) a file no one reviewed as part of the repository
    home = Path(family.path).parent.resolve()
    if home not in path.parents:
        raise FamilyYamlError(family.path, field_name, f"{value!r} leads to {path}, outside {_display(home)}/ "
                              f"(a symlink?); notes must be files in the repository: copy it in")
    return path


def _notes_source(family: Family, key: str, default: str | None) -> Path | list | None:
    value = family.get(key)
    if value is None:
        if default is None:
            return None
        path = Path(family.path).parent / default
        return _inside(family, path.resolve(), key, default) if path.is_file() else None
    if isinstance(value, str):
        return _relative(family, value, key)
    if key == "notes" and isinstance(value, list):
        return value
    raise FamilyYamlError(
        family.path, key, f"expected a path to a markdown file (relative to the YAML), got {value!r}"
    )


def parse_sources(family: Family) -> None:
    """Parse every notes source of the family (files or inline) without running a note: the facts stage calls it
    first, so a malformed note (``notes: ['oops']``) fails in a second, not after the minutes of collecting."""
    for key, default in (("notes", f"{family.family}.notes.md"), ("vision_notes", f"{family.family}.vision.md"),
                         ("shared_vision_notes", None)):
        source = _notes_source(family, key, default)
        if isinstance(source, list):
            _inline_notes(family, source)
        elif source is not None:
            parse_notes(source, family.family)


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
        slug = item.get("slug") or slugify(title)
        if slug_taken(slug):
            raise FamilyYamlError(family.path, f"{where}.slug", slug_taken(slug).replace("'## Title {#", "'slug: ").replace("}'", "'"))
        notes.append(Note(title, slug, Path(family.path), first or 0, lines))
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
