"""No built page links to a script: a URL that is not http(s), mailto, relative or #fragment fails the
build, naming the page and the URL, whatever text field of the facts carried it and however it is spelled.

Render-level: the fixture facts (tests/fixtures/facts) with payloads in every text field that
reaches a page, rendered and built with mkdocs into a temporary directory. No torch.
"""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path

import pytest

from generator.site.html_guard import check_site
from generator.site.render import MkdocsBuildError, mkdocs_build, render_site
from generator.site.safe_urls import UnsafeUrlError, is_safe_url, unsafe_urls

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "facts"
FAMILY = "qwen3_5_moe_text"
PAGE = f"families/{FAMILY}/index.html"


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "\x01javascript:alert(1)",
        "java\tscript:alert(1)",
        "java\nscript:alert(1)",
        "javascript\r:alert(1)",
        "vbscript:msgbox(1)",
        "VBScript:msgbox(1)",
        "data:text/html,<script>alert(1)</script>",
        "DATA:text/html;base64,PHNjcmlwdD4=",
        "livescript:alert(1)",
        "file:///etc/passwd",
        "ftp://example.com/x",
    ],
)
def test_unsafe_schemes(url):
    assert not is_safe_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://nnsight.net",
        "http://example.com/a?b=c:d",
        "mailto:someone@example.com",
        "HTTPS://EXAMPLE.COM",
        "#the-mixture",
        "",
        "../families/",
        "assets/nncanon.css",
        "/search/",
        "//cdn.example.com/x.js",
        "?q=1",
        "families/qwen3/#v-model.layers[i]",
        "java%73cript:alert(1)",  # a percent sign cannot be in a scheme: a relative path
    ],
)
def test_safe_urls(url):
    assert is_safe_url(url)


@pytest.mark.parametrize(
    "markup",
    [
        '<a href="javascript:alert(1)">x</a>',
        '<a href="jav&#x09;ascript:alert(1)">x</a>',
        '<a href="jav&#9;ascript:alert(1)">x</a>',
        '<a href="&#106;avascript:alert(1)">x</a>',
        '<a href="&#x6A;&#x61;vascript:alert(1)">x</a>',
        '<a href="javascript&colon;alert(1)">x</a>',
        '<a href="&#x01;javascript:alert(1)">x</a>',
        '<a href="java&NewLine;script:alert(1)">x</a>',
        "<a href='  JAVASCRIPT:alert(1)'>x</a>",
        "<a href=javascript:alert(1)>x</a>",
        '<img src="data:image/svg+xml,<svg onload=alert(1)>">',
        '<img srcset="ok.png 1x, javascript:alert(1) 2x">',
        '<img srcset="data:image/png;base64,iVBOR 2x">',
        '<form action="javascript:alert(1)"></form>',
        '<button formaction="vbscript:msgbox(1)">b</button>',
        '<svg><a xlink:href="javascript:alert(1)"><text>x</text></a></svg>',
        '<svg><use href="data:image/svg+xml,x"/></svg>',
        '<iframe src="data:text/html,<script>alert(1)</script>"></iframe>',
        '<object data="javascript:alert(1)"></object>',
        '<video poster="javascript:alert(1)"></video>',
        '<a ping="https://ok.example javascript:alert(1)">x</a>',
        '<meta http-equiv="refresh" content="0; url=javascript:alert(1)">',
        '<base href="javascript:alert(1)//">',
    ],
)
def test_every_url_attribute_is_judged_after_entities(markup):
    assert len(unsafe_urls(f"<p>before</p>\n{markup}\n")) == 1, markup


def test_the_site_own_links_pass():
    page = (
        '<a href="https://squidfunk.github.io/mkdocs-material/">m</a><a href="#__code_0">c</a>'
        '<link rel="stylesheet" href="../assets/nncanon.css"><img src="x.svg" srcset="x.svg 1x, x@2.svg 2x">'
        '<a href="mailto:a@b.c">mail</a><div data-path="model.layers[i]" data-x="javascript:x">text</div>'
        "<p>javascript:alert(1) as text is text</p>"
    )
    assert unsafe_urls(page) == []


def test_check_site_names_page_line_and_url(tmp_path):
    (tmp_path / "families" / "x").mkdir(parents=True)
    (tmp_path / "index.html").write_text('<a href="https://ok.example">ok</a>\n')
    (tmp_path / "families" / "x" / "index.html").write_text('<p>\n<a href="jav&#x09;ascript:alert(1)">x</a>\n')
    with pytest.raises(UnsafeUrlError) as caught:
        check_site(tmp_path)
    message = str(caught.value)
    assert "families/x/index.html:2" in message and "'jav\\tascript:alert(1)'" in message  # the built site's guard
    assert "index.html:1" not in message.replace("x/index.html", "")


# ---------------------------------------------------------------- through the whole render and build

# Each payload names the field it is in, so the error can be checked field by field.
NOTE_REFS = {
    "note-ref": "javascript:alert('note-ref')",
    "note-case": "JaVaScRiPt:alert('note-case')",
    "note-data": "data:text/html,alert('note-data')",
    "note-vb": "vbscript:msgbox('note-vb')",
    "note-control": "\x01javascript:alert('note-control')",
}


def _ref_links(refs: dict[str, str]) -> str:
    uses = " ".join(f"[{name}][{name}]" for name in refs)
    image = "![pic][note-img]\n\n[note-img]: javascript:alert('note-img')\n"
    defs = "\n".join(f"[{name}]: {url}" for name, url in refs.items())
    return f"\n\nSee {uses}.\n\n{image}\n{defs}\n"


def evil_facts() -> dict:
    facts = json.loads((FIXTURES / f"{FAMILY}.json").read_text(encoding="utf-8"))
    evil = copy.deepcopy(facts)
    evil["notes"][0]["markdown"] += _ref_links(NOTE_REFS)
    evil["saes"]["markdown"] += "\n\n[sae][sae]\n\n[sae]: javascript:alert('sae')\n"
    shared = evil["vision_notes"]["shared"]["notes"][0]
    shared["markdown"] += "\n\n[vnote][vnote]\n\n[vnote]: javascript:alert('vnote')\n"
    breakout = "\n\n[{0}](javascript:alert('{0}')) [{0}-ref][{0}-ref]\n\n[{0}-ref]: javascript:alert('{0}-ref')\n\n"
    evil["tagline"] += breakout.format("tagline")
    evil["tags"].append(breakout.format("tag"))
    evil["lines"].append(breakout.format("line"))
    evil["docstring"] += breakout.format("docstring")
    value = evil["hosts"][0]["values"][0]
    value["description"] += breakout.format("description")
    value["conditions"] = [{"needs": breakout.format("needs"), "why": breakout.format("why")}]
    evil["notes"][1]["title"] += " [title](javascript:alert('title'))"
    return evil


def _live_unsafe_urls(site: Path) -> dict[str, set[str]]:
    """An independent look at the built pages: every attribute value that decodes to a script-ish scheme."""
    found: dict[str, set[str]] = {}
    attribute = re.compile(r"""\s([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")
    for page in site.rglob("*.html"):
        for tag in re.findall(r"<[a-zA-Z][^>]*>", page.read_text(encoding="utf-8")):
            for name, *values in attribute.findall(tag):
                url = html.unescape("".join(values))
                if name.startswith("data-") or name in ("class", "id", "title", "alt", "aria-label", "content"):
                    continue
                if re.match(r"(javascript|vbscript|data):", re.sub(r"[\x00-\x20]", "", url), re.I):
                    found.setdefault(str(page.relative_to(site)), set()).add(url)
    return found


def test_unsafe_urls_in_any_text_field_fail_the_build_naming_page_and_url(tmp_path):
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / f"{FAMILY}.json").write_text(json.dumps(evil_facts()), encoding="utf-8")
    render_site(tmp_path / "facts", tmp_path / "docs")
    site = tmp_path / "site"
    with pytest.raises(UnsafeUrlError) as caught:
        mkdocs_build(tmp_path / "docs", site)
    message = str(caught.value)
    live = _live_unsafe_urls(site)
    assert live, "the payloads made no live link: the test no longer tests anything"
    for page, urls in live.items():
        for url in urls:
            assert f"{page}:" in message and repr(url) in message, (page, url, message)
    # the reference-style links in every markdown field became live links and are named
    for name in [*NOTE_REFS, "note-img", "sae", "vnote"]:
        assert f"alert('{name}')" in message or f"msgbox('{name}')" in message, name
    assert message.count(PAGE) >= len(NOTE_REFS) + 3
    # the text fields reach the page as text: none of them made a live link
    for name in ("tagline", "tag", "line", "docstring", "description", "needs", "why", "title"):
        assert f"alert('{name}')" not in message and f"alert('{name}-ref')" not in message, name


@pytest.mark.parametrize(
    "definition",
    ["jav&#x09;ascript:alert(1)", "javascript&colon;alert(1)", "<javascript:alert(1)>"],
)
def test_entities_in_notes_are_escaped_before_markdown(tmp_path, definition):
    """An entity or an angle-bracket autolink in a note is escaped into text, so it can never decode
    into a scheme; mkdocs --strict then fails on the (now relative, broken) link, naming the page."""
    facts = json.loads((FIXTURES / f"{FAMILY}.json").read_text(encoding="utf-8"))
    facts["notes"][0]["markdown"] += f"\n\n[x][r]\n\n[r]: {definition}\n"
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / f"{FAMILY}.json").write_text(json.dumps(facts), encoding="utf-8")
    render_site(tmp_path / "facts", tmp_path / "docs")
    try:
        mkdocs_build(tmp_path / "docs", tmp_path / "site")
    except (MkdocsBuildError, UnsafeUrlError) as e:
        assert f"families/{FAMILY}" in str(e)
    assert _live_unsafe_urls(tmp_path / "site") == {}
