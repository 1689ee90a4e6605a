"""The mkdocs run sets the renderer's HTML blocks aside from Markdown, and those the search leaves out from the
search's parser (site_templates/hooks.py ``set_aside``): a speed-up only, so the site must be the same to the byte.

Built here both ways from a sample of families, one of each kind of page, with every hand-written and aggregate
page: every file the same, the search index's entries too. The rules of what is set aside are checked on their own
on the cases Markdown reads differently."""

from __future__ import annotations

import filecmp
import importlib.util
import logging
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: the reference page, an encoder-decoder, an image-text family, a selective scan, an encoder and a speech model
SAMPLE = ["qwen3_5_moe_text", "t5", "llava", "mamba", "bert", "whisper", "gemma2"]


def _hooks():
    spec = importlib.util.spec_from_file_location("nncanon_site_hooks", REPO / "site_templates" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _differing(comparison: filecmp.dircmp) -> list[str]:
    _, mismatch, errors = filecmp.cmpfiles(comparison.left, comparison.right, comparison.common_files, shallow=False)
    found = [os.path.join(comparison.left, name) for name in mismatch + errors + comparison.left_only
             + comparison.right_only]
    return found + [f for sub in comparison.subdirs.values() for f in _differing(sub)]


def test_setting_the_html_aside_changes_no_byte_of_the_site(tmp_path, native_facts, monkeypatch):
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    from generator.site.render import MKDOCS_YML, render_site

    render_site(native_facts, tmp_path / "docs", families=SAMPLE)
    level = logging.getLogger("mkdocs").level
    logging.getLogger("mkdocs").setLevel(logging.ERROR)
    try:
        for mode in ("off", "on"):
            monkeypatch.setenv("NNCANON_MD_ISLANDS", mode)
            build(load_config(str(MKDOCS_YML), docs_dir=str(tmp_path / "docs"), site_dir=str(tmp_path / mode),
                              site_url="http://127.0.0.1:1/", strict=True))
    finally:
        logging.getLogger("mkdocs").setLevel(level)
    assert not _differing(filecmp.dircmp(tmp_path / "off", tmp_path / "on"))
    # and it did set most of the flagship page aside, most of that past the search's parser too
    page = (tmp_path / "docs" / "families" / "qwen3_5_moe_text.md").read_text(encoding="utf-8")
    text, early, late = _hooks().set_aside(page)
    assert len(text) < len(page) / 3 and sum(map(len, late)) > sum(map(len, early)), (len(text), len(page))


@pytest.mark.parametrize("markdown, early, late", [
    # a block after a blank line, and one right after it: both set aside, the search's one after the search
    ('Text.\n\n<div class="a">\n<p>x</p>\n</div>\n<details data-search-exclude>\n<summary>s</summary>\n</details>\n',
     ['<div class="a">\n<p>x</p>\n</div>'], ['<details data-search-exclude>\n<summary>s</summary>\n</details>']),
    # a block straight after a paragraph's line is inline HTML to Markdown: left
    ('Text.\n<div class="a">x</div>\n', [], []),
    # inside a code fence: left
    ('```html\n\n<div class="a">x</div>\n```\n', [], []),
    # a close that is not at a line's end, a block with Markdown inside (md_in_html), an inline element: left
    ('\n<div>x</div> and more\n', [], []),
    ('\n<div markdown="1">\n**x**\n</div>\n', [], []),
    ('\n<span>x</span>\n', [], []),
    # a left-out block holding a heading (which starts a search section all the same): before the search
    ('\n<div data-search-exclude>\n<h3 id="a">A</h3>\n</div>\n', ['<div data-search-exclude>\n<h3 id="a">A</h3>\n</div>'],
     []),
    # nested blocks of the same tag close at the outer's close
    ('\n<div>\n<div>x</div>\n</div>\n', ['<div>\n<div>x</div>\n</div>'], []),
])
def test_what_is_set_aside_is_what_markdown_passes_through(markdown, early, late):
    hooks = _hooks()
    text, got_early, got_late = hooks.set_aside(markdown)
    assert (got_early, got_late) == (early, late)
    back = hooks.put_back(hooks.put_back(text, got_early), got_late, hooks._LATE_STAND_IN)
    assert back == markdown
