"""The transformers, torch and nnsight releases nncanon is verified on, and what it says under any other.

Every value, relation and edit on the site is checked on the tiny checkpoints under each release of
`VERIFIED` (pyproject declares the same ranges; the site itself is built on the ones `constraints.txt`
locks). Under a release outside them nncanon still loads: `load` warns once per package and release, naming
the range, and a value whose op the transformers release does not have is `Unavailable` naming the release
(`StandardModel._install_sources`) rather than failing the load, as it does inside the range, where it means the
family module is wrong.
"""

from __future__ import annotations

import json
import warnings
from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files

#: the transformers releases every family is verified on (pyproject's transformers requirement;
#: tests/test_release_range.py): the locked 5.23 and every release after it up to 5.25 (make verify-newest)
VERIFIED = ">=5.23,<5.26"
#: each package's verified range, pyproject's requirement of it: torch and nnsight move the traces as a transformers
#: release moves the read points (nnsight recompiles forwards; torch names the ops), so each is verified, not assumed:
#: torch 2.13.0, 2.14.1 and 2.15.0, each with every family verified (generator verify --keep-going --force) under it
RANGES = {"transformers": VERIFIED, "torch": ">=2.13,<2.16", "nnsight": "==0.8.1"}

_warned: set[tuple[str, str]] = set()


class UnverifiedRelease(UserWarning):
    """The installed transformers, torch or nnsight is outside the releases nncanon is verified on."""


def installed(package: str = "transformers") -> str:
    # read once per process: importlib.metadata parses the package's METADATA file on every call, and every load
    # asks. A plain dict: shipped code must not hold an lru_cache (tests/test_remote.py)
    if package not in _INSTALLED:
        try:
            _INSTALLED[package] = version(package)
        except PackageNotFoundError:
            _INSTALLED[package] = "(not installed)"
    return _INSTALLED[package]


_INSTALLED: dict[str, str] = {}


def verified(release: str | None = None, package: str = "transformers") -> bool:
    """Whether ``release`` of ``package`` (the installed one by default) is in its range (`RANGES`)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    release = installed(package) if release is None else release
    try:
        return Version(release) in SpecifierSet(RANGES[package])  # torch's 2.13.0+cpu is in >=2.13 (PEP 440)
    except InvalidVersion:
        return False


def warn_unverified() -> None:
    """Warn, once per process, package and release, when the installed transformers, torch or nnsight is outside
    its verified range."""
    for package, spec in RANGES.items():
        release = installed(package)
        if (package, release) in _warned or verified(release, package):
            continue
        _warned.add((package, release))
        warnings.warn(f"nncanon is verified on {package} {spec}; {package} {release} is installed, so a value the "
                      f"release moved may be unavailable or differ (pip install '{package}{spec}')",
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
