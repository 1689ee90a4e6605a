"""Escaping facts text for the family pages: markdown that renders as markdown but cannot inject HTML.

HTML parts of a page are escaped by jinja2's autoescape; markdown parts (notes, SAE text) by
:func:`escape_markdown`, which leaves code blocks and code spans alone and neutralizes raw HTML,
attribute lists and script links elsewhere; one line of text in a markdown context (a heading, a
table cell) by :func:`escape_markdown_inline`. Links that markdown itself makes (reference-style
links) are judged after the build, on the HTML: see :mod:`generator.safe_urls`.
"""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_BAD_LINK = re.compile(r"\]\(\s*(?:javascript|vbscript|data):", re.I)
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|])")


def _escape_html_text(text: str) -> str:
    # quotes stay: outside attributes they are plain text, and the toc would show &#39; literally
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_prose(text: str) -> str:
    """Markdown prose outside code: no raw HTML, no attribute lists, no script links."""
    text = _escape_html_text(text)
    text = text.replace("{", "\\{").replace("}", "\\}")
    return _BAD_LINK.sub("](#", text)


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
            text = "\n".join(prose)
            parts, last = [], 0
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
