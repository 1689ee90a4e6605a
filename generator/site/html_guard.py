"""No built page runs a script it was not built to run: the one check over the final HTML of every page.

Text from a family's YAML, its file name and its notes reaches a page through jinja2, markdown and
mkdocs' own templates (the nav's titles), and each of them escapes differently, or not at all. So
whatever the escaping upstream, the HTML a browser gets is judged here, after mkdocs has run:

- every ``<script>`` is one the theme or ``site_templates/`` emits: a ``src`` among the site's own
  scripts (the theme's bundle, ``extra_javascript``), the theme's ``__config`` data, or an inline
  body that one of the theme's or our templates writes, character for character (a template's
  ``{{ ... }}`` matches a value with no quote or ``<``);
- no attribute is an event handler (``on*=``), and no ``srcdoc`` (HTML in an attribute);
- every URL in an attribute passes :mod:`generator.site.safe_urls`.

A page that breaks one fails the build (:class:`UnsafeHtmlError`), naming the page, the line, what
was found and where that page's text comes from; nothing is rewritten (see safe_urls for why).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from html.parser import HTMLParser
from pathlib import Path

from generator.site.safe_urls import UnsafeUrlError, unsafe_urls

ROOT = Path(__file__).resolve().parents[2]
_BUNDLE = re.compile(r"assets/javascripts/(bundle|workers/search)\.[0-9a-f]+\.min\.js")
_ANIMATED = frozenset({"animate", "set"})  # SVG: <animate attributeName="href" values="javascript:...">


class UnsafeHtmlError(UnsafeUrlError):
    """A built page holds a script, an event handler or a URL that no template of the site put there."""


@functools.cache
def _own_scripts() -> tuple[frozenset[str], tuple[re.Pattern, ...]]:
    """(script srcs relative to the site root, patterns of the inline bodies our and the theme's templates write)."""
    from material import templates

    # mkdocs.yml's extra_javascript: the scripts in site_templates/assets, which render_site copies to assets/
    srcs = frozenset(f"assets/{p.name}" for p in (ROOT / "site_templates" / "assets").glob("*.js"))
    bodies = []
    sources = [*Path(templates.__file__).parent.rglob("*.html"), *(ROOT / "site_templates" / "overrides").rglob("*.html")]
    for path in sources:
        bodies += re.findall(r"<script>(.*?)</script>", path.read_text(encoding="utf-8"), re.S)
    spec = importlib.util.spec_from_file_location("_nncanon_hooks", ROOT / "site_templates" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    bodies += [s.removeprefix("<script>").removesuffix("</script>") for s in (hooks._FIND_ROOT, hooks._MOVE_CONFIG)]
    scope = '__md_scope=new URL("{{ config.extra.scope | d(base_url) }}",location)'
    bodies += [b.replace(scope, hooks.SCOPE_404) for b in bodies if scope in b]  # 404.html's (hooks.relocatable_404)
    patterns = []
    for body in bodies:
        parts = re.split(r"\{\{.*?\}\}", body, flags=re.S)
        patterns.append(re.compile(r"[^\"'<]*".join(re.escape(p) for p in parts), re.S))
    return srcs, tuple(patterns)


def _site_path(src: str) -> str:
    return re.sub(r"^(?:\.\.?/)+", "", src)


class _Guard(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str]] = []
        self._script: tuple[int, str] | None = None  # (line, start tag) of an inline script being read
        self._body: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line, text = self.getpos()[0], self.get_starttag_text() or f"<{tag}>"
        for name, value in attrs:
            if name.startswith("on") or name == "srcdoc":
                self.found.append((line, f"attribute {name}= in {_short(text)}"))
            elif tag in _ANIMATED and name in ("to", "from", "values") and value and "script:" in value.lower():
                self.found.append((line, f"attribute {name}= in {_short(text)}"))
        if tag != "script":
            return
        attributes = dict(attrs)
        if attributes.get("src") is not None:
            src = _site_path(attributes["src"] or "")
            if src not in _own_scripts()[0] and not _BUNDLE.fullmatch(src):
                self.found.append((line, f"a script that is not the site's own: {_short(text)}"))
        elif attributes.get("type") == "application/json" and attributes.get("id") == "__config":
            self._script = None
        else:
            self._script = (line, text)
            self._body = []

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._body.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            line, text = self._script
            body = "".join(self._body)
            if not any(p.fullmatch(body) for p in _own_scripts()[1]):
                self.found.append((line, f"a script no template of the site writes: {_short(text + body)}"))
            self._script = None


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def unsafe_html(page: str) -> list[tuple[int, str]]:
    """(line, what) of every script, handler or unsafe URL on one HTML page that the site did not put there."""
    guard = _Guard()
    guard.feed(page)
    guard.close()
    urls = [(line, f"<{tag} {attribute}={url!r}>") for line, tag, attribute, url in unsafe_urls(page)]
    return sorted(guard.found + urls)


def _source(page: str) -> str:
    parts = Path(page).parts
    if len(parts) == 3 and parts[0] == "families":
        return f"from families/{parts[1]}.yaml, its notes or its facts"
    return "from docs_src/ or a family's YAML (nav titles, the families index)"


def check_site(site_dir: Path, limit: int = 20) -> None:
    """Raise :class:`UnsafeHtmlError` if any ``*.html`` page under site_dir fails the guard."""
    site_dir = Path(site_dir)
    problems = []
    for page in sorted(site_dir.rglob("*.html")):
        rel = str(page.relative_to(site_dir))
        for line, what in unsafe_html(page.read_text(encoding="utf-8", errors="replace")):
            problems.append(f"{rel}:{line}: {what} ({_source(rel)})")
    if problems:
        more = f"\n  ... and {len(problems) - limit} more" if len(problems) > limit else ""
        raise UnsafeHtmlError(
            f"{len(problems)} unsafe script(s), handler(s) or URL(s) in the built site {site_dir} (only the site's own "
            f"scripts, and http(s), mailto, relative and #fragment URLs may reach a page; fix the text named):\n"
            + "\n".join(f"  {p}" for p in problems[:limit])
            + more
        )
