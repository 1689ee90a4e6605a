"""The TransformerLens agreement the build shows is checked once per key on a machine: a build in a new build
directory (every test's) copies the shared result instead of booting the bridge again, and a key that differs
(another CPU capability asked for, another family's sources) checks again. The bridge itself is faked here;
tests/test_transformer_lens.py runs it."""

from __future__ import annotations

import pytest

from generator.facts import tl_names
from generator.recipe.family import get_family


@pytest.fixture
def fake_check(monkeypatch, tmp_path):
    if not tl_names.installed():
        pytest.skip("TransformerLens is not installed (the nncanon[transformer-lens] extra)")
    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    runs = []

    def check(families):
        runs.append(list(families))
        return {family: {"model::logits": {"hook": "logits", "agreed": True, "error": "0"}} for family in families}

    monkeypatch.setattr(tl_names, "check", check)
    return runs


def test_a_new_build_directory_reuses_the_shared_result(fake_check, tmp_path, monkeypatch):
    first = tl_names.annotations([get_family("llama"), get_family("gpt2")], tmp_path / "a" / "transformer_lens", progress=lambda line: None)
    again = tl_names.annotations([get_family("llama"), get_family("gpt2")], tmp_path / "b" / "transformer_lens", progress=lambda line: None)
    assert fake_check == [["llama", "gpt2"]]  # the second build directory ran no check
    assert again == first
    assert (tmp_path / "b" / "transformer_lens" / "llama.json").exists()  # copied into the build directory too
    # another capability asked for is another key: checked again
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    tl_names.annotations([get_family("llama")], tmp_path / "c" / "transformer_lens", progress=lambda line: None)
    assert fake_check == [["llama", "gpt2"], ["llama"]]


def test_a_damaged_shared_result_is_checked_again(fake_check, tmp_path):
    tl_names.annotations([get_family("llama")], tmp_path / "a" / "transformer_lens", progress=lambda line: None)
    (tmp_path / "cache" / "transformer_lens" / "llama.json").write_text('{"key": ')  # a killed build's half file
    found = tl_names.annotations([get_family("llama")], tmp_path / "b" / "transformer_lens", progress=lambda line: None)
    assert fake_check == [["llama"], ["llama"]] and found["llama"]["model::logits"]["agreed"] is True


def test_make_sites_build_checks_every_family_and_refuses_a_disagreement(fake_check, tmp_path, monkeypatch):
    from generator.facts.tl_agreement import TransformerLensError, for_the_site

    monkeypatch.delenv("NNCANON_TL", raising=False)  # as make site runs: nothing kept, every family checked
    families = [get_family("llama"), get_family("gpt2")]
    found = for_the_site(families, tmp_path / "a" / "transformer_lens", progress=lambda line: None)
    assert fake_check == [["llama", "gpt2"]] and set(found) == {"llama", "gpt2"}

    def wrong(names):
        return {name: {"model.layers[i]::layer_output": {"hook": "blocks.{i}.hook_resid_post", "agreed": False,
                                                         "error": None}} for name in names}

    monkeypatch.setattr(tl_names, "check", wrong)
    with pytest.raises(TransformerLensError, match=r"^mistral: claim TransformerLens names: "
                                                   r"model.layers\[i\]::layer_output: TransformerLens's "
                                                   r"blocks.\{i\}.hook_resid_post holds another tensor"):
        for_the_site([get_family("mistral")], tmp_path / "b" / "transformer_lens", progress=lambda line: None)


def test_the_suites_builds_show_what_their_directory_keeps_and_check_none(fake_check, tmp_path, monkeypatch):
    from generator.facts.tl_agreement import for_the_site

    tl_names.annotations([get_family("llama")], tmp_path / "a" / "transformer_lens", progress=lambda line: None)
    monkeypatch.setenv("NNCANON_TL", "kept")
    found = for_the_site([get_family("llama"), get_family("gpt2")], tmp_path / "a" / "transformer_lens",
                         progress=lambda line: None)
    assert fake_check == [["llama"]]  # gpt2, kept nowhere here, is not checked: its page has no column
    assert set(found) == {"llama"}
    # a directory that keeps nothing (a test's own build directory) shows none, whatever the machine's cache holds
    assert for_the_site([get_family("llama")], tmp_path / "b" / "transformer_lens", progress=lambda line: None) == {}
