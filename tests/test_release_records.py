"""The kept release records: each is what its release's facts say (CI: the locked release here, the newest in
`make verify-newest`), the Releases page says what moved between them, and support() says when the installed
transformers is not one the family was verified on."""

from __future__ import annotations

import copy
import json

import pytest

from generator.facts import release_record
from generator.site.releases_page import releases_page, verified_on


def test_the_kept_record_of_the_locked_release_is_what_its_facts_say(native_facts):
    release_record.check(native_facts)


def _facts(family: str, release: str, read_at: str = "the module's own input", error: str = "0") -> dict:
    return {"family": family, "versions": {"transformers": release},
            "hosts": [{"path": "model.layers[i]", "values": [
                {"name": "layer_input", "read_at": read_at, "availability": {"eager": True, "sdpa": True},
                 "writable": True}]}],
            "relations": [{"host": "model.layers[i]", "text": "layer_input + attention_output == layer_mid",
                           "errors": {"eager": error, "sdpa": error}, "skipped": {}}]}


def _write(directory, *facts):
    directory.mkdir(parents=True)
    for f in facts:
        (directory / f"{f['family']}.json").write_text(json.dumps(f), encoding="utf-8")
    return directory


@pytest.fixture
def records(tmp_path, monkeypatch):
    monkeypatch.setattr(release_record, "RECORDS", tmp_path / "releases")
    monkeypatch.setattr(release_record, "LIBRARY_RECORD", tmp_path / "verified_releases.json")
    monkeypatch.setattr(release_record, "REPO_ROOT", tmp_path)
    return tmp_path


def test_a_record_written_from_facts_checks_and_a_moved_value_is_named(records):
    old = _write(records / "a" / "facts", _facts("llama", "5.23.0"), _facts("gpt2", "5.23.0"))
    release_record.write(old)
    release_record.check(old)
    assert json.loads((records / "verified_releases.json").read_text()) == {"gpt2": ["5.23.0"], "llama": ["5.23.0"]}
    moved = _write(records / "b" / "facts", _facts("llama", "5.23.0", read_at="op attention_interface_2"),
                   _facts("gpt2", "5.23.0"))
    with pytest.raises(release_record.ReleaseRecordError, match=r"llama value model.layers\[i\]::layer_input"):
        release_record.check(moved)


def test_facts_of_two_releases_in_one_directory_are_refused(records):
    mixed = _write(records / "facts", _facts("llama", "5.23.0"), _facts("gpt2", "5.24.0"))
    with pytest.raises(release_record.ReleaseRecordError, match="several transformers releases"):
        release_record.record(mixed)


def test_the_releases_page_says_what_moved_and_what_did_not():
    before = {"transformers": "5.23.0", "families": {
        "llama": release_record.digest(_facts("llama", "5.23.0")),
        "gpt2": release_record.digest(_facts("gpt2", "5.23.0"))}}
    after = copy.deepcopy(before)
    after["transformers"] = "5.24.0"
    after["families"]["llama"] = release_record.digest(_facts("llama", "5.24.0", read_at="op attention_interface_2",
                                                              error="1e-06"))
    page = releases_page([before, after])
    assert "## 5.23.0 to 5.24.0" in page
    assert "Nothing moved on 1 families (gpt2)" in page
    assert "| model.layers\\[i\\].layer\\_input | read at the module's own input | read at op attention\\_interface\\_2 |" \
        in page
    assert "eager: 1e-06" in page
    assert verified_on([before, after]) == {"llama": ["5.23.0", "5.24.0"], "gpt2": ["5.23.0", "5.24.0"]}
    assert "Every family (2) is verified under every transformers release below (5.23.0, 5.24.0)" in page


def test_the_releases_page_names_each_family_not_verified_on_every_release_and_its_range():
    """issue 52: the page said every family is verified under each release while gptj and codegen were not."""
    before = {"transformers": "5.23.0", "families": {
        "llama": release_record.digest(_facts("llama", "5.23.0")), "gptj": release_record.digest(_facts("gptj", "5.23.0"))}}
    after = {"transformers": "5.24.0", "families": {"llama": release_record.digest(_facts("llama", "5.24.0"))}}
    page = releases_page([before, after], {"gptj": ">=5.23,<5.24"})
    assert "Every family" not in page
    assert "1 of 2 families are verified under every transformers release below (5.23.0, 5.24.0)" in page
    assert "- gptj is verified on 5.23.0 only: its YAML narrows it to transformers `>=5.23,<5.24`" in page


def test_support_says_when_the_installed_release_was_not_verified_for_the_family(model, monkeypatch):
    from nncanon.guards import releases

    on = releases.verified_on(model.family)
    assert on, f"{model.family} has no kept release record (python -m generator releases)"
    monkeypatch.setattr(releases, "installed", lambda: on[0])
    assert model.support().release is None
    monkeypatch.setattr(releases, "installed", lambda: "5.99.0")
    support = model.support()
    assert support.release == (f"{model.family} is verified on transformers {', '.join(on)}; transformers 5.99.0 "
                               "is installed, so a value the release moved may be unavailable or differ")
    assert str(support).splitlines()[0] == f"! {support.release}"
