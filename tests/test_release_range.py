"""What keeps nncanon honest across transformers releases: finding a family imports only its module, a family
whose transformers module is missing fails alone and says so, and a pin does not depend on the release's
version string."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from limits import HANG

from generator.recipe.family import get_family

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True,
                          timeout=HANG, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})  # a hung import only


def test_a_family_imports_only_its_module_and_a_missing_transformers_module_fails_only_its_family():
    done = _run("""
        import sys
        sys.modules["transformers.models.qwen3_5_moe"] = None  # as on a release without Qwen3.5-MoE
        from nncanon.families import FamilyImportError, family_for_config, known_model_types
        assert "qwen3_5_moe_text" in known_model_types()
        llama = family_for_config({"model_type": "llama"}, "config.json")
        loaded = sorted(m.rsplit(".", 1)[1] for m in sys.modules
                        if m.startswith("nncanon.families.") and not m.rsplit(".", 1)[1].startswith("_"))
        assert loaded == ["llama"], loaded
        try:
            family_for_config({"model_type": "qwen3_5_moe_text"}, "config.json")
        except FamilyImportError as error:
            print(error)
        else:
            raise AssertionError("no FamilyImportError")
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    message = done.stdout.strip()
    assert "\n" not in message
    assert "'qwen3_5_moe_text'" in message and "transformers.models.qwen3_5_moe" in message
    assert "transformers 5." in message


def test_the_pin_ignores_the_transformers_version_line(tmp_path):
    from generator.checkpoint.checkpoints import checkpoint_files, content_sha256

    config = {"hidden_size": 8, "model_type": "llama", "transformers_version": "5.23.0", "vocab_size": 10}
    for release in ("5.23.0", "5.24.0"):
        directory = tmp_path / release
        directory.mkdir()
        text = json.dumps(config | {"transformers_version": release}, indent=2, sort_keys=True) + "\n"
        (directory / "config.json").write_text(text)
        (directory / "generation_config.json").write_text(
            json.dumps({"bos_token_id": 1, "transformers_version": release}, indent=2, sort_keys=True) + "\n")
        (directory / "model.safetensors").write_bytes(b"weights")
    assert checkpoint_files(tmp_path / "5.23.0") == checkpoint_files(tmp_path / "5.24.0")
    edited = tmp_path / "5.24.0" / "config.json"
    before = content_sha256(edited)
    edited.write_text(edited.read_text().replace('"hidden_size": 8', '"hidden_size": 9'))
    assert content_sha256(edited) != before  # every other byte still counts


def test_the_pin_leaves_out_the_config_keys_a_release_derives(tmp_path):
    """5.25's FalconConfig writes num_key_value_heads, derived from num_kv_heads and multi_query, into config.json;
    5.23 and 5.24 do not. Listed in tiny.derived_config_keys, its line is left out of the pin, so both releases'
    checkpoints pin the same; a key not listed, or any other edit, still counts."""
    from generator.checkpoint.checkpoints import checkpoint_files

    base = {"model_type": "falcon", "multi_query": True, "num_kv_heads": 4, "vocab_size": 10}
    written = {"5.24.0": base, "5.25.0": base | {"num_key_value_heads": 1}}
    for release, config in written.items():
        directory = tmp_path / release
        directory.mkdir()
        text = json.dumps(config | {"transformers_version": release}, indent=2, sort_keys=True) + "\n"
        (directory / "config.json").write_text(text)
    derived = ("num_key_value_heads",)
    assert checkpoint_files(tmp_path / "5.24.0", derived) == checkpoint_files(tmp_path / "5.25.0", derived)
    assert checkpoint_files(tmp_path / "5.24.0") != checkpoint_files(tmp_path / "5.25.0")
    edited = tmp_path / "5.25.0" / "config.json"
    edited.write_text(edited.read_text().replace('"num_kv_heads": 4', '"num_kv_heads": 2'))
    assert checkpoint_files(tmp_path / "5.24.0", derived) != checkpoint_files(tmp_path / "5.25.0", derived)


class _Derives:
    """A config class that derives ``doubled`` from ``width`` as it is built (as FalconConfig num_key_value_heads)."""

    def __init__(self, width: int = 1, **rest):
        self.width, self.doubled = width, 2 * width

    @classmethod
    def from_dict(cls, config: dict):
        return cls(**config)


@pytest.mark.parametrize(("listed", "written", "why"), [
    (["doubled"], {"width": 3, "doubled": 6}, None),
    (["doubled"], {"width": 3}, None),  # a release that does not write it: nothing left out
    (["doubled"], {"width": 3, "doubled": 7}, "gives 6, not the 7 written"),
    (["width"], {"width": 3, "doubled": 6}, "a field _Derives takes"),
    (["doubled"], {"width": 3, "doubled": 6, "recipe": True}, "the recipe sets it"),
])
def test_only_a_derived_key_may_leave_the_pin(tmp_path, listed, written, why):
    """The build checks each listed key the release wrote: not a field the class takes, not the recipe's, and given
    back with the same value from the rest of the file; else the pin must count it, said in one line."""
    from generator.checkpoint import derived_keys
    from generator.recipe.fields import FamilyYamlError

    recipe = {"doubled": 6} if "recipe" in written else {}
    family = SimpleNamespace(path=tmp_path / "fam.yaml", tiny={"config": recipe, "derived_config_keys": listed})
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in written.items() if k != "recipe"}))
    if why is None:
        derived_keys.check(family, _Derives, tmp_path)
        return
    with pytest.raises(FamilyYamlError) as info:
        derived_keys.check(family, _Derives, tmp_path)
    assert why in str(info.value) and "tiny.derived_config_keys" in str(info.value) and "\n" not in str(info.value)


def _eager(module, x):
    return x


class _Moved:
    """A forward as transformers 5.0 writes it: the attention function bound twice before its one call."""

    flag = False

    def forward(self, x):
        attention_interface = _eager
        if self.flag:
            attention_interface = _eager
        out = attention_interface(self, x)
        return out


def test_an_attention_call_is_found_by_what_it_calls_when_a_release_renumbers_it():
    from nnsight.intervention.source import compiled

    from nncanon.core.locators import call, resolve

    labels = compiled(_Moved.forward)
    assert "attention_interface_1" in labels.names  # on this forward, the second binding, not the call
    assert resolve(call("attention_interface_1"), labels) == "attention_interface_2"
    assert resolve("attention_interface_1", labels) == "attention_interface_1"  # a plain label is taken as it is
    assert resolve(call("softmax_0"), labels) == "softmax_0"  # no such call: left for the reader to report


def test_a_mixer_whose_cache_argument_is_not_found_makes_the_conv_state_unavailable(monkeypatch):
    """Never a silent None: a release whose mixer takes its cache under a name nncanon does not know."""
    import pytest

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.parts.recurrent import conv

    monkeypatch.setattr(conv, "cache_arg", lambda mixer_class: None)
    model = nncanon.load(checkpoint_dir(get_family("mamba2")))
    for name in ("conv_state_input", "conv_state_output"):
        with pytest.raises(nncanon.Unavailable, match=rf"model.layers\[1\].mixer.{name} is unavailable: "
                                                      r"transformers 5\.\S+'s Mamba2Mixer.forward takes its cache "
                                                      r"under none of the names nncanon reads"):
            getattr(model.layers[1].mixer, name)
        row = next(r for r in model.support() if r.name == name)
        assert not row.available and "cache under none of the names" in row.condition


def test_pyproject_declares_the_verified_range_and_the_lock_lies_inside_it():
    """transformers, torch and nnsight: pyproject requires each package's verified range (RANGES), and
    constraints.txt locks a release inside it."""
    import re
    import tomllib

    from nncanon.guards import releases

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lock = (REPO / "constraints.txt").read_text()
    for package, spec in releases.RANGES.items():
        declared = next(d for d in project["dependencies"] if re.match(rf"{package}\b", d))
        assert declared.replace(" ", "") == f"{package}{spec}"
        locked = re.search(rf"^{package}==(\S+)$", lock, re.MULTILINE).group(1)
        assert releases.verified(locked, package), package
    assert releases.RANGES["transformers"] == releases.VERIFIED
    assert not releases.verified("5.22.0") and not releases.verified("5.26.0")
    assert releases.verified("5.24.0") and releases.verified("5.25.0")
    assert releases.verified("2.13.0+cpu", "torch") and releases.verified("2.14.1", "torch")
    assert releases.verified("2.15.0+cu132", "torch")  # every family verified under 2.15 (issue 50)
    assert not releases.verified("2.16.0", "torch") and not releases.verified("0.8.0", "nnsight")


@pytest.mark.parametrize(("package", "outside", "inside"), [("transformers", "5.12.1", "5.23.0"),
                                                            ("torch", "2.16.0", "2.13.0+cpu"),
                                                            ("nnsight", "0.9.0", "0.8.1")])
def test_load_warns_once_outside_the_verified_range(monkeypatch, package, outside, inside):
    """A transformers, torch or nnsight outside its range warns once per process at load, naming the package and
    its range; every package inside its range: no warning."""
    import re
    import warnings

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.guards import releases

    fine = {"transformers": "5.23.0", "torch": "2.13.0", "nnsight": "0.8.1"}
    monkeypatch.setattr(releases, "installed", lambda name="transformers": {**fine, package: outside}[name])
    monkeypatch.setattr(releases, "_warned", set())
    spec = re.escape(releases.RANGES[package])
    checkpoint = checkpoint_dir(get_family("llama"))
    with pytest.warns(releases.UnverifiedRelease, match=rf"verified on {package} {spec}; {package} "
                                                        rf"{re.escape(outside)} is installed") as caught:
        nncanon.load(checkpoint)
    assert len([w for w in caught if issubclass(w.category, releases.UnverifiedRelease)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", releases.UnverifiedRelease)
        nncanon.load(checkpoint)  # once
        monkeypatch.setattr(releases, "installed", lambda name="transformers": {**fine, package: inside}[name])
        monkeypatch.setattr(releases, "_warned", set())
        nncanon.load(checkpoint)  # verified releases: no warning


def test_an_argument_the_release_does_not_pass_is_unavailable_not_an_index_error():
    import pytest

    from nncanon import Unavailable
    from nncanon.core.layouts import layout
    from nncanon.core.locators import call, op
    from nncanon.core.values import Value, ValueProperty

    value = Value("attention_queries", layout("Queries", "batch heads seq head_dim"), "the queries",
                  op(call("attention_interface_1"), io="input", element=1))
    with pytest.raises(Unavailable, match=r"model.layers\[0\].self_attn.attention_queries is unavailable: it is read "
                                          r"at inside the forward: the arguments of attention_interface_1, element 1, "
                                          r"which transformers \S+ does not pass there \(IndexError"):
        ValueProperty(value)._select(((object(),), {}), "model.layers[0].self_attn.attention_queries")
