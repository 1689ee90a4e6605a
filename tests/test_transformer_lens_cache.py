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
