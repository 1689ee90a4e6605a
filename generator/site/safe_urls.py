"""No page of the built site links to a script: every URL in its HTML is http(s), mailto, relative or #.

Facts text reaches the pages through markdown (notes, SAE text) and through templates (tagline,
tags, lines, descriptions). Escaping the markdown source cannot catch everything markdown turns
into a link (a reference-style ``[x][r]`` with ``[r]: javascript:...`` is a live link), so the
URLs are judged after mkdocs has run, on the HTML a browser gets: `generator.site.html_guard.check_site` reads
every ``*.html`` page of a built site with :func:`unsafe_urls` (beside its script and handler checks) and
raises naming each page and URL.

It fails the build rather than rewriting the URL: a neutralised link would be a silently broken
page, while a failed build tells the author which page and which link to fix; and a failed build
publishes nothing, so neither the page nor the search index (which holds the pages' text) carries
the link.

A URL is judged as a browser parses it: entities decoded (the HTML parser does that), then ASCII
whitespace and control characters dropped, then the scheme read, case-insensitively.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
# attributes that hold one URL; srcset-like ones hold a list (below)
URL_ATTRIBUTES = frozenset(
    {
        "href",
        "src",
        "action",
        "formaction",
        "xlink:href",
        "poster",
        "background",
        "cite",
        "longdesc",
        "codebase",
        "manifest",
        "icon",
        "usemap",
        "profile",
    }
)
SRCSET_ATTRIBUTES = frozenset({"srcset", "imagesrcset"})  # "a.png 1x, b.png 2x"
SPACED_ATTRIBUTES = frozenset({"ping", "archive"})  # "a b"
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
_IGNORED = re.compile(r"[\x00-\x20\x7f]")  # what browsers strip or skip in a URL, and then some
_REFRESH_URL = re.compile(r"url\s*=\s*(.*)", re.I | re.S)


class UnsafeUrlError(ValueError):
    """A built page holds a URL that is not http(s), mailto, relative or a #fragment."""


def scheme(url: str) -> str | None:
    """The scheme a browser would read from an (entity-decoded) attribute value, lower case; None if relative."""
    m = _SCHEME.match(_IGNORED.sub("", url).lower())
    return m.group(1) if m else None


def is_safe_url(url: str) -> bool:
    s = scheme(url)
    return s is None or s in SAFE_SCHEMES


class _Urls(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[int, str, str, str]] = []  # (line, tag, attribute, url)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in URL_ATTRIBUTES or (name == "data" and tag == "object"):
                urls = [value]
            elif name in SRCSET_ATTRIBUTES:  # a data: URL's commas only make more (harmless) candidates
                urls = [candidate.split()[0] for candidate in value.split(",") if candidate.split()]
            elif name in SPACED_ATTRIBUTES:
                urls = value.split()
            elif tag == "meta" and name == "content" and (m := _REFRESH_URL.search(value)):
                urls = [m.group(1).strip("'\" ")]
            else:
                continue
            for url in urls:
                if not is_safe_url(url):
                    self.found.append((self.getpos()[0], tag, name, url))

    handle_startendtag = handle_starttag


def unsafe_urls(page: str) -> list[tuple[int, str, str, str]]:
    """(line, tag, attribute, url) of every unsafe URL in one HTML page."""
    parser = _Urls()
    parser.feed(page)
    parser.close()
    return parser.found
