"""Escaping facts text for the family pages: markdown that renders as markdown but cannot inject HTML.

HTML parts of a page are escaped by jinja2's autoescape; markdown parts (notes, SAE text) by
:func:`escape_markdown`, which leaves code blocks and code spans alone and neutralizes raw HTML,
attribute lists and script links elsewhere; one line of text in a markdown context (a heading, a
table cell) by :func:`escape_markdown_inline`. Links that markdown itself makes (reference-style
links) are judged after the build, on the HTML: see :mod:`generator.site.safe_urls`.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

# What is kept verbatim as code must be code to Python-Markdown too, or raw HTML in it goes live: so a
# fence opens only at most 3 spaces in (4 make an indented code block, whose next lines are prose); a
# code span is opened by a backtick run no backslash escapes, closed by a run of the same length, and
# cannot cross a blank line or a line starting with "<" (Markdown ends the paragraph there, or starts an
# HTML block). Text wrongly taken for prose is only shown escaped, text wrongly taken for code would be
# live, so each rule errs to prose; any block boundary Markdown draws that these rules miss is caught on
# the built page by generator/site/html_guard.py.
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_CLOSE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_SEGMENT = re.compile(r"(\n[ \t]*\n|\n(?= {0,3}<))")  # where a code span cannot reach across
_BAD_LINK = re.compile(r"\]\(\s*((?:javascript|vbscript|data|livescript):(?:[^()\s]|\([^()\s]*\))*)", re.I)

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|])")


class UnsafeLinkError(ValueError):
    """A markdown link to a script URL in facts text: the renderer names the family and the note."""

    def __init__(self, url: str) -> None:
        super().__init__(f"a link to {url!r}: only http(s), mailto, relative and #fragment links may be on a page")
        self.url = url


def _escape_html_text(text: str) -> str:
    # quotes stay: outside attributes they are plain text, and the toc would show &#39; literally
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_prose(text: str) -> str:
    """Markdown prose outside code: no raw HTML, no attribute lists, no script links."""
    text = _escape_html_text(text)
    text = text.replace("{", "\\{").replace("}", "\\}")
    if m := _BAD_LINK.search(text):
        raise UnsafeLinkError(m.group(1))
    return text


def escape_markdown(md: str) -> str:
    """Escape facts markdown so that it renders as markdown but cannot inject HTML.

    Fenced code blocks and code spans are kept verbatim (markdown escapes them itself); a
    fence's info string is cut to a bare language name so it cannot carry attributes.
    """
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if prose:
            parts = []
            for text in _SEGMENT.split("\n".join(prose)):
                last = 0
                for m in _CODE_SPAN.finditer(text):
                    parts.append(_escape_prose(text[last : m.start()]))
                    parts.append(m.group(0))
                    last = m.end()
                parts.append(_escape_prose(text[last:]))
            out.append("".join(parts))
            prose.clear()

    for line in md.splitlines():
        m = _FENCE.match(line)
        if fence is None and m:
            flush()
            fence = m.group(2)
            lang = re.match(r"[\w+-]*", m.group(3).strip()).group(0)
            out.append(f"{m.group(1)}{fence}{lang}")
        elif fence is not None:
            out.append(line)
            m = _CLOSE.match(line)
            if m and m.group(2).startswith(fence) and not m.group(3).strip():
                fence = None
        else:
            prose.append(line)
    flush()
    if fence is not None:
        out.append(fence)  # close an unterminated fence rather than swallow the page
    return "\n".join(out)


def escape_markdown_inline(text: str) -> str:
    """One line of facts text in a markdown context (a heading, a table cell): literal."""
    return _MD_SPECIAL.sub(r"\\\1", _escape_html_text(" ".join(str(text).split())))


def slug(text: str) -> str:
    """An id fragment from any text: lower case, [a-z0-9_-] only."""
    s = re.sub(r"[^a-z0-9_]+", "-", str(text).lower()).strip("-")
    return s or "x"


_IDENT_BREAK = re.compile(r"(?=[.\[])")


def ident_breaks(name: str) -> Markup:
    """A dotted or bracketed standard name, escaped, with a ``<wbr>`` before each ``.`` and ``[``:
    a narrow screen may wrap it there and nowhere else (the CSS forbids breaks mid-identifier)."""
    parts = [p for p in _IDENT_BREAK.split(str(name)) if p]
    return Markup("<wbr>").join(escape(p) for p in parts)


def ranges(indices: list[int]) -> str:
    """[0, 1, 2, 4, 5, 6, 8] -> "0–2, 4–6, 8"."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
