"""The hand-written pages' code runs: every ```python block of each page the build runs
(generator/docs_run.PAGES: the home page, getting started, the recipes), in order, on the tiny
checkpoints standing in for the paths the pages name; and a failing block fails with one line
naming the page, the block and its line."""

from __future__ import annotations

import pytest

from generator.docs_run import PAGES, DocsError, run_page, run_pages


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_code_runs(page):
    run_page(page)


def test_a_failing_block_names_the_page_and_the_block(tmp_path):
    page = tmp_path / "broken.md"
    page.write_text("# Broken\n\n```python\nx = 1\n```\n\ntext\n\n```python display\nnot run at all(\n```\n\n"
                    "```python\nassert x == 2, 'x is one'\n```\n")
    with pytest.raises(DocsError) as caught:
        run_page(page)
    message = str(caught.value)
    assert message == f"{page}, python block 3 (line 14): an assert fails: assert x == 2, 'x is one': " \
                      f"AssertionError: x is one", message
    assert "\n" not in message


def test_pages_run_once_until_they_change(tmp_path, monkeypatch):
    import generator.docs_run as docs_run

    monkeypatch.setattr(docs_run, "run_page", lambda page: None)
    assert run_pages(tmp_path, progress=lambda line: None, pages=("index.md",)) == ["index.md"]
    assert run_pages(tmp_path, progress=lambda line: None, pages=("index.md",)) == []
    monkeypatch.setattr(docs_run, "page_key", lambda page: "changed")
    assert run_pages(tmp_path, progress=lambda line: None, pages=("index.md",)) == ["index.md"]
