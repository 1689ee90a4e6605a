"""Issue 46, item 4: each input that once ended in a traceback, a raw torch message, a silent accept or a run that
passed having done nothing is one line naming the file or value and the fix, raised as the project's own error."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from one_line import cli_error

REPO = Path(__file__).resolve().parents[1]


def _families(tmp_path: Path, edit: str, name: str = "llama") -> Path:
    """families/ holding one family and its notes, its YAML's top-level key replaced by the line ``edit``."""
    directory = tmp_path / "families"
    directory.mkdir()
    text = (REPO / "families" / f"{name}.yaml").read_text(encoding="utf-8")
    key = edit.split(":", 1)[0]
    lines = [line for line in text.splitlines() if not line.startswith(f"{key}:")]
    (directory / f"{name}.yaml").write_text("\n".join(lines) + f"\n{edit}\n", encoding="utf-8")
    shutil.copy(REPO / "families" / f"{name}.notes.md", directory / f"{name}.notes.md")
    return directory


# ---------------------------------------------------------------- the family YAML


def test_notes_that_are_a_list_of_strings_name_the_field(tmp_path, monkeypatch, capsys):
    """``notes: ['oops']`` once met ``Path / list`` (TypeError) where the build looks for new --like's markers; the
    notes are now parsed before anything is collected."""
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(tmp_path, "notes: ['oops']")))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    err = cli_error(capsys, ["verify", "llama"])
    assert err == (f"error: {tmp_path}/families/llama.yaml: field 'notes[0]': expected a mapping with 'title' and "
                   "'markdown' strings\n")


def test_verify_that_verifies_nothing_fails_saying_why(tmp_path, monkeypatch, capsys):
    """``releases: '>=99.0'`` left out the installed release and ``verify llama`` exited 0 having verified nothing."""
    monkeypatch.setenv("NNCANON_FAMILIES", str(_families(tmp_path, "releases: '>=99.0'")))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    import transformers

    err = cli_error(capsys, ["verify", "llama"])
    assert err == (f"error: {tmp_path}/families/llama.yaml: field 'releases': '>=99.0' leaves out transformers "
                   f"{transformers.__version__}, the one installed: nothing was verified; run under a release it "
                   "names, or widen releases\n")


def test_verify_with_no_family_fails_saying_why(tmp_path, monkeypatch, capsys):
    (tmp_path / "families").mkdir()
    monkeypatch.setenv("NNCANON_FAMILIES", str(tmp_path / "families"))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    err = cli_error(capsys, ["verify"])
    assert err.startswith(f"error: {tmp_path}/families: no family YAML (*.yaml) in it: nothing to verify"), err


# ---------------------------------------------------------------- a full disk


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")  # as write() raises it: no file name


def _full_under(directory: Path, monkeypatch) -> None:
    """Path.write_text fails as a full disk does, for the files under ``directory`` only."""
    write_text = Path.write_text

    def write(path, *args, **kwargs):
        return _full() if directory in Path(path).parents else write_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write)


def test_a_full_disk_under_the_facts_names_the_build_directory(tmp_path, monkeypatch, capsys):
    import generator.facts.collect as collect

    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    monkeypatch.setattr(collect, "collect", lambda family, progress, kernels_only: {"family": "llama"})
    _full_under(tmp_path / "build" / "facts", monkeypatch)
    err = cli_error(capsys, ["verify", "llama"])
    assert err == (f"error: {tmp_path}/build/facts: the disk holding it is full (No space left on device); free space "
                   "there, or set NNCANON_BUILD to a directory on another disk, and run the command again\n")


def test_a_full_disk_under_the_checkpoints_names_the_cache(tmp_path, monkeypatch):
    from generator.checkpoint import checkpoints
    from generator.disk import DiskFull
    from generator.recipe.family import get_family

    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(checkpoints, "_build_into", _full)
    with pytest.raises(DiskFull, match=rf"^{tmp_path}/cache: the disk holding it is full .*NNCANON_CACHE"):
        checkpoints._temp_build(get_family("llama"))
    assert not [p for p in (tmp_path / "cache").iterdir()]  # the half-written checkpoint is gone


def test_a_full_disk_under_the_survey_names_its_directory(tmp_path, monkeypatch):
    from generator.disk import DiskFull
    from generator.survey import run

    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(DiskFull, match=rf"^{tmp_path}/survey: the disk holding it is full .*NNCANON_CACHE"):
        run._write(tmp_path / "survey" / "llama.json", {})


def test_a_full_disk_under_the_rendered_pages_names_the_build_directory(tmp_path, monkeypatch):
    from generator.disk import DiskFull
    from generator.site.render import render_site

    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(DiskFull, match=rf"^{tmp_path}: the disk holding it is full .*NNCANON_BUILD"):
        render_site(REPO / "tests" / "fixtures" / "facts", tmp_path / "docs")
    assert not list(tmp_path.iterdir())  # the staging directory is gone


def test_a_full_disk_under_the_site_names_it_and_the_option(tmp_path, monkeypatch):
    import mkdocs.commands.build

    from generator.disk import DiskFull
    from generator.site.mkdocs_run import mkdocs_build

    monkeypatch.setattr(mkdocs.commands.build, "build", _full)
    (tmp_path / "docs").mkdir()
    with pytest.raises(DiskFull, match=rf"^{tmp_path}: the disk holding it is full .*--site DIR"):
        mkdocs_build(tmp_path / "docs", tmp_path / ".site.new")


def test_a_full_disk_nothing_else_named_names_every_directory_the_commands_write(tmp_path, monkeypatch, capsys):
    from generator import __main__ as cli

    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(cli.COMMANDS, "verify", cli.Command(help="", run=_full, arguments=cli._verify_only_arguments))
    err = cli_error(capsys, ["verify"])
    assert err.startswith("error: the disk is full (No space left on device): free space on the disk of the build "
                          f"directory {tmp_path}/build (NNCANON_BUILD), the checkpoint cache {tmp_path}/cache "
                          "(NNCANON_CACHE) or the site (--site)"), err


# ---------------------------------------------------------------- serve


def test_serve_refuses_a_site_that_is_a_file(capsys, monkeypatch, tmp_path):
    import generator.build as build

    (tmp_path / "site").write_text("not a site\n")
    monkeypatch.setattr(build, "SITE", tmp_path / "site")
    err = cli_error(capsys, ["serve", "--port", "0"])
    assert err == (f"error: {tmp_path}/site is a file, not a built site: move it away and run "
                   "`python -m generator build`\n")


# ---------------------------------------------------------------- the library


@pytest.fixture(scope="module")
def llama_dir() -> Path:
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    return checkpoint_dir(get_family("llama"))


@pytest.fixture(scope="module")
def llama(llama_dir):
    import nncanon

    return nncanon.load(llama_dir)


STREAM = "pass a tensor [..., hidden_size=40] (a residual stream: model.layers[i].layer_output)"


@pytest.mark.parametrize("make, says", [
    (lambda torch: torch.zeros(1, 2, 7), f"x is [1, 2, 7], its last dimension is not hidden_size=40; {STREAM}"),
    (lambda torch: [[0.0] * 40], f"x is a list; {STREAM}"),
    (lambda torch: torch.zeros(1, 2, 40, dtype=torch.float64),
     "x is torch.float64, the model's head torch.float32: pass x.to(torch.float32)"),
], ids=["width", "list", "float64"])
def test_unembed_names_what_is_not_a_stream_of_the_model(llama, make, says):
    """Each once met torch's own message (a size mismatch, 'list' has no dtype, 'double != float')."""
    import torch

    from nncanon.research.lens import LensInputError

    with pytest.raises(LensInputError) as caught:
        llama.unembed(make(torch))
    assert str(caught.value) == f"model.unembed(x): {says}"
    with pytest.raises(LensInputError, match="model.unembed"), llama.trace("The cat"):  # inside a trace too
        llama.unembed(make(torch)).save()
    assert llama.unembed(torch.zeros(1, 2, 40)).shape == (1, 2, llama.vocab_size)


@pytest.mark.parametrize("make, says", [
    (lambda w: "abc", "W_Q = str: assign a tensor of shape [8, 40, 24] (torch.float32), or nested lists of numbers"),
    (lambda w: [[1, "a"]], "W_Q = list: assign a tensor of shape [8, 40, 24] (torch.float32), or nested lists"),
    (lambda w: w.to(w.dtype.to_complex()), "W_Q is torch.float32; the assigned tensor is torch.complex64, whose "
                                            "imaginary part would be dropped: assign tensor.real if that is meant"),
], ids=["string", "list of a string", "complex"])
def test_a_weight_assigned_what_it_cannot_hold_is_named(llama, make, says):
    """A string met torch's "new(): invalid data type 'str'"; a complex tensor was copied with its imaginary part
    dropped."""
    from nncanon.research.weights import WeightTypeError

    attn = llama.layers[0].self_attn
    before = attn.W_Q.clone()
    with pytest.raises(WeightTypeError) as caught:
        attn.W_Q = make(before)
    assert str(caught.value).startswith(f"model.layers[0].self_attn.{says}"), str(caught.value)
    assert attn.W_Q.equal(before)


def test_a_pickled_weights_file_is_named_not_torchs_six_lines(llama_dir, tmp_path):
    import torch
    from safetensors.torch import load_file

    import nncanon
    from nncanon.families import CheckpointError

    directory = tmp_path / "llama"
    shutil.copytree(llama_dir, directory)
    weights = load_file(directory / "model.safetensors")
    (directory / "model.safetensors").unlink()
    torch.save({**weights, "extra": torch.nn.Linear(1, 1)}, directory / "pytorch_model.bin")
    with pytest.raises(CheckpointError) as caught:
        nncanon.load(directory)
    assert str(caught.value) == (
        f"{directory}/pytorch_model.bin: a pickled weights file holding more than tensors "
        "(torch.nn.modules.linear.Linear), which nncanon will not unpickle (it could run code): use the checkpoint's "
        ".safetensors files, or save its state dict as safetensors from a copy you trust")


# ---------------------------------------------------------------- the survey's cache


def test_a_survey_failure_the_key_cannot_see_is_surveyed_again(tmp_path, monkeypatch):
    """A config class that raised (here: an optional package it imports is missing) was cached as the type's
    answer, and only ``survey --force`` cleared it; a failure of the class's own code under the keyed releases is
    still kept (the Coverage page's answer for that release)."""
    from generator.survey import measure, run

    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    real = measure.tiny_config

    def missing(model_type):
        raise ModuleNotFoundError("No module named 'einops_but_not_installed'")

    monkeypatch.setattr(measure, "tiny_config", missing)
    quiet = lambda line: None  # noqa: E731
    assert run.survey_all(["llama"], progress=quiet)["surveyed"] == 1
    row = (tmp_path / "build" / "survey" / "llama.json").read_text(encoding="utf-8")
    assert '"failure": "ModuleNotFoundError: No module named' in row and '"retry": true' in row
    monkeypatch.setattr(measure, "tiny_config", real)  # the package installed: no --force needed
    assert run.survey_all(["llama"], progress=quiet)["surveyed"] == 1
    assert run.survey_all(["llama"], progress=quiet)["surveyed"] == 0

    def own_bug(model_type):
        raise ValueError("the config class's own check failed")

    monkeypatch.setattr(measure, "tiny_config", own_bug)
    assert run.survey_all(["llama"], progress=quiet, force=True)["surveyed"] == 1
    assert run.survey_all(["llama"], progress=quiet)["surveyed"] == 0  # deterministic under the key: kept


def test_the_survey_key_changes_with_torch_and_nnsight(monkeypatch):
    from generator.survey import run

    before, release = run.cache_key("llama", "code"), run._release
    for package in ("torch", "nnsight"):
        monkeypatch.setattr(run, "_release", lambda name, package=package: "0.0" if name == package else release(name))
        assert run.cache_key("llama", "code") != before, package
