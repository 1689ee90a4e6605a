"""``mkdocs build --strict`` in-process: every warning fails it, the build date is fixed, and a page with
a script, an event handler or an unsafe URL no template put there fails it (:mod:`generator.site.html_guard`)."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from generator.disk import room
from generator.site.html_guard import check_site

MKDOCS_YML = Path(__file__).resolve().parents[2] / "mkdocs.yml"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.levelname}: {record.getMessage()}")


class MkdocsBuildError(RuntimeError):
    pass


# The build date mkdocs writes (sitemap.xml's lastmod, sitemap.xml.gz's header) when
# SOURCE_DATE_EPOCH is unset: fixed, so that builds on different days are byte-identical.
DEFAULT_SOURCE_DATE_EPOCH = 1735689600  # 2025-01-01 00:00:00 UTC


@contextlib.contextmanager
def source_date_epoch():
    """``$SOURCE_DATE_EPOCH`` (https://reproducible-builds.org/specs/source-date-epoch/) for mkdocs'
    ``get_build_date``, set to :data:`DEFAULT_SOURCE_DATE_EPOCH` while unset; restored after."""
    saved = os.environ.get("SOURCE_DATE_EPOCH")
    if saved is not None and not saved.strip().isdigit():
        raise MkdocsBuildError(f"SOURCE_DATE_EPOCH={saved!r}: expected seconds since 1970 (an integer)")
    if saved is None:
        os.environ["SOURCE_DATE_EPOCH"] = str(DEFAULT_SOURCE_DATE_EPOCH)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)


def mkdocs_build(docs_dir: Path, site_dir: Path) -> None:
    """``mkdocs build --strict`` of docs_dir into site_dir with the repository's mkdocs.yml.

    Runs in-process; any warning (from loading the config or from the build) fails it with a
    MkdocsBuildError that lists mkdocs' warnings. The build date is ``$SOURCE_DATE_EPOCH`` or a
    fixed one (:func:`source_date_epoch`), and a page with a URL that is not http(s), mailto,
    relative or a #fragment, a script or an on*= handler fails it with an UnsafeHtmlError naming the page
    (:func:`generator.site.html_guard.check_site`).
    """
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    handler = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(handler)
    try:
        try:
            config = load_config(
                str(MKDOCS_YML),
                docs_dir=str(Path(docs_dir).resolve()),
                site_dir=str(Path(site_dir).resolve()),
                strict=True,
            )
            if handler.messages:
                raise MkdocsBuildError("mkdocs.yml: " + "; ".join(handler.messages))
            with source_date_epoch(), room(Path(site_dir).parent, "build the site elsewhere with --site DIR"):
                build(config)
        except (MkDocsException, SystemExit) as e:
            lines = "\n".join(f"  {m}" for m in handler.messages) or f"  {e}"
            raise MkdocsBuildError(f"mkdocs build --strict of {docs_dir} failed:\n{lines}") from e
        if handler.messages:  # a warning strict mode did not count (outside the build's own loggers)
            raise MkdocsBuildError(
                f"mkdocs build of {docs_dir} warned:\n" + "\n".join(f"  {m}" for m in handler.messages)
            )
    finally:
        logger.removeHandler(handler)
    check_site(site_dir)
