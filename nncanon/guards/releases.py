"""The transformers releases nncanon is verified on, and what it says under any other.

Every value, relation and edit on the site is checked on the tiny checkpoints under each release of
`VERIFIED` (pyproject declares the same range; the site itself is built on the one `constraints.txt`
locks). Under a release outside it nncanon still loads: `load` warns once naming the range, and a value
whose op the release does not have is `Unavailable` naming the release (`StandardModel._install_sources`)
rather than failing the load, as it does inside the range, where it means the family module is wrong.
"""

from __future__ import annotations

import json
import warnings
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files

#: the releases every family is verified on (pyproject's transformers requirement; tests/test_release_range.py)
VERIFIED = ">=5.23,<5.25"

_warned: set[str] = set()


class UnverifiedRelease(UserWarning):
    """The installed transformers is outside the releases nncanon is verified on."""


def installed() -> str:
    # read once per process: importlib.metadata parses the package's METADATA file on every call, and every load
    # asks. A plain dict: shipped code must not hold an lru_cache (tests/test_remote.py)
    if "transformers" not in _INSTALLED:
        try:
            _INSTALLED["transformers"] = version("transformers")
        except PackageNotFoundError:
            _INSTALLED["transformers"] = "(not installed)"
    return _INSTALLED["transformers"]


_INSTALLED: dict[str, str] = {}


def verified(release: str | None = None) -> bool:
    """Whether ``release`` (the installed one by default) is in `VERIFIED`."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    release = installed() if release is None else release
    try:
        return Version(release) in SpecifierSet(VERIFIED)
    except InvalidVersion:
        return False


def warn_unverified() -> None:
    """Warn, once per process and release, when the installed transformers is outside `VERIFIED`."""
    release = installed()
    if release in _warned or verified(release):
        return
    _warned.add(release)
    warnings.warn(f"nncanon is verified on transformers {VERIFIED}; transformers {release} is installed, so a "
                  f"value the release moved may be unavailable or differ (pip install 'transformers{VERIFIED}')",
                  UnverifiedRelease, stacklevel=3)


def named() -> str:
    """The installed release in a clause, and whether it is verified: for an error or an Unavailable message."""
    release = installed()
    return f"transformers {release}" + ("" if verified(release) else f" (outside the verified {VERIFIED})")


def verified_on(family: str) -> list[str]:
    """The transformers releases ``family``'s facts were verified under (``nncanon/verified_releases.json``, which
    ``python -m generator releases`` writes from the kept release records; CI checks each against its facts)."""
    path = files("nncanon").joinpath("verified_releases.json")
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # cut short or not text: support() would fail on every model with json's message
        kept = error
    if not isinstance(kept, dict) or not all(isinstance(on, list) for on in kept.values()):
        raise ValueError(f"{path}: damaged ({kept if isinstance(kept, ValueError) else 'not a family -> releases map'});"
                         f" reinstall nncanon, or in a checkout: git checkout -- nncanon/verified_releases.json")
    return kept.get(family, [])


def family_note(family: str) -> str | None:
    """One line for ``support()`` when the installed release is not one ``family`` was verified under."""
    release, on = installed(), verified_on(family)
    if release in on:
        return None
    where = f"verified on transformers {', '.join(on)}" if on else "verified on no transformers release yet"
    return (f"{family} is {where}; transformers {release} is installed, so a value the release moved may be "
            "unavailable or differ")
