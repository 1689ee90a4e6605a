"""The survey (generator/survey): what it says holds on a model type is what plain hooks see, a model type
that fails says why in one line, and its facts are the same under every CPU capability."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from capabilities import capabilities, environment
from limits import HANG

ROOT = Path(__file__).resolve().parents[1]
#: a plain pre-norm decoder (every shared relation holds), GPT-2 (learned positions: the stream entering the
#: first block is not the token embedding) and Gemma-2 (sandwich norms: the Llama residual adds do not hold)
TREES = ("llama", "gpt2", "gemma2")


@pytest.fixture(scope="module")
def surveyed() -> dict[str, dict]:
    from generator.survey.measure import survey

    return {model_type: survey(model_type) for model_type in TREES}


def _hooked(model_type: str) -> dict:
    """The survey's tiny model run once under plain forward hooks on its native modules (no nnsight)."""
    import torch

    from generator.survey.measure import build, inputs

    model = build(model_type)
    body = model.get_submodule("model" if model_type != "gpt2" else "transformer")
    layers = body.layers if hasattr(body, "layers") else body.h
    norm = body.norm if hasattr(body, "norm") else body.ln_f
    seen: dict = {"in": [], "out": [], "attn": [], "mlp": []}
    handles = []
    for layer in layers:
        attention = layer.self_attn if hasattr(layer, "self_attn") else layer.attn
        handles += [
            layer.register_forward_pre_hook(lambda m, a, k: seen["in"].append(a[0] if a else k["hidden_states"]),
                                            with_kwargs=True),
            layer.register_forward_hook(lambda m, a, o: seen["out"].append(o[0] if isinstance(o, tuple) else o)),
            attention.register_forward_hook(lambda m, a, o: seen["attn"].append(o[0])),
            layer.mlp.register_forward_hook(lambda m, a, o: seen["mlp"].append(o)),
        ]
    handles += [norm.register_forward_hook(lambda m, a, o: seen.update(norm_in=a[0], norm_out=o)),
                model.lm_head.register_forward_hook(lambda m, a, o: seen.update(head_in=a[0], head_out=o)),
                model.get_input_embeddings().register_forward_hook(lambda m, a, o: seen.update(embedded=o))]
    _, kwargs = inputs()
    with torch.no_grad():
        seen["logits"] = model(**kwargs).logits
    for handle in handles:
        handle.remove()
    return seen


def _agree(pairs) -> bool:
    from nncanon.core.precision import STEP
    from nncanon.core.relations import error

    # a sum or a copy recomputed: one float32 step (nncanon/core/precision.py), the shared relations' own tolerance
    return all(error(a, b) <= STEP for a, b in pairs)


@pytest.mark.parametrize("model_type", TREES)
def test_shared_relations_are_what_plain_hooks_see(surveyed, model_type):
    """Each shared relation the survey says holds (or not) holds (or not) between tensors plain hooks read."""
    seen = _hooked(model_type)
    n = len(seen["in"])
    truth = {
        "model: layers[i].layer_output == layers[i+1].layer_input, on every block":
            _agree(zip(seen["out"][:-1], seen["in"][1:])),
        "model: layers[0].layer_input == token_embeddings": _agree([(seen["embedded"], seen["in"][0])]),
        "model: final_norm_output == norm(layers[-1].layer_output)": _agree([(seen["norm_in"], seen["out"][-1])]),
        "model: lm_head_output == lm_head(final_norm_output)": _agree([(seen["head_in"], seen["norm_out"])]),
        "model: logits == lm_head_output (nothing past the head)": _agree([(seen["logits"], seen["head_out"])]),
        # both residual adds at once: the block's output is its input plus what attention and the MLP return
        "residual": _agree((seen["in"][i] + seen["attn"][i] + seen["mlp"][i], seen["out"][i]) for i in range(n)),
    }
    relations = surveyed[model_type]["relations"]
    said = dict(relations)
    said["residual"] = all(relations[k] is None for k in (
        "model.layers[i]: layer_input + {mixer}.attention_output == layer_mid",
        "model.layers[i]: layer_mid + mlp.mlp_output == layer_output"))
    for key, holds in truth.items():
        assert (said[key] is None or said[key] is True) == holds, (model_type, key, said[key])


def test_what_the_trees_are(surveyed):
    """The three trees differ where they should: the survey is not saying "holds" of everything."""
    llama, gpt2, gemma2 = (surveyed[t] for t in TREES)
    assert all(v is None for v in llama["values"].values()) and all(r is None for r in llama["relations"].values())
    assert gpt2["relations"]["model: layers[0].layer_input == token_embeddings"] == "does not hold"
    assert gemma2["relations"]["model.layers[i]: layer_input + {mixer}.attention_output == layer_mid"] == "does not hold"
    assert "norms: sandwich norms" in gemma2["shape"] and "mlp: plain" in gpt2["shape"]
    assert "norms: pre-norm" in llama["shape"] and "norms: pre-norm" in gpt2["shape"]


def test_the_closest_family_is_chosen_by_block_structure_and_says_what_differs(surveyed):
    """GLM-4 norms each sublayer's input and output under names unlike Gemma's (post_self_attn_layernorm): its
    placement is measured on the forward, so its closest family is the sandwich one, and against llama alone the
    row names the difference. OLMo-2's norms on the sublayers' outputs only read as post-norm."""
    from generator.site.coverage import closest, features
    from generator.survey.measure import survey

    glm4, olmo2 = survey("glm4"), survey("olmo2")
    assert "norms: sandwich norms" in glm4["shape"] and "norms: post-norm" in olmo2["shape"]
    paged = [(t, features(surveyed[t])) for t in TREES]
    family, _, differs = closest(glm4, paged)
    assert family == "gemma2" and not any(d.startswith("norms") for d in differs), (family, differs)
    family, _, differs = closest(glm4, paged[:1])
    assert family == "llama" and "norms: sandwich norms here, pre-norm there" in differs, differs


def test_a_model_type_that_does_not_build_says_why_in_one_line():
    """Qwen 4 (experimental)'s text config leaves its indexer's budget None, which its model divides by."""
    from generator.survey.measure import survey

    facts = survey("qwen4_exp_text")
    assert not facts["builds"] and not facts["wraps"]
    assert facts["failure"].startswith("TypeError: unsupported operand") and "\n" not in facts["failure"]


@pytest.mark.parametrize("model_type", ["ministral", "hunyuan_v1_dense"])
def test_a_head_dim_defaulting_to_none_is_shrunk_with_the_other_sizes(model_type):
    """Ministral's and HunYuan's configs default head_dim to None, which their attention reads as the head's width
    (``None ** -0.5`` failed the build): the shrunk config states it, hidden / heads, and the row wraps."""
    from transformers import CONFIG_MAPPING

    from generator.survey.measure import survey
    from generator.survey.shrink import HEAD_DIM, shrunk_kwargs

    assert shrunk_kwargs(CONFIG_MAPPING[model_type])["head_dim"] == HEAD_DIM
    facts = survey(model_type)
    assert facts["builds"] and facts["forwards"] and facts["wraps"], facts["failure"]


def test_a_row_is_surveyed_once_per_machine(tmp_path, monkeypatch):
    """A second build directory copies the row from the shared cache; nothing is surveyed again."""
    from generator.survey.run import survey_all

    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "cache"))
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("NNCANON_BUILD", str(first))
    assert survey_all(["llama"], progress=lambda line: None)["surveyed"] == 1
    monkeypatch.setenv("NNCANON_BUILD", str(second))
    assert survey_all(["llama"], progress=lambda line: None)["surveyed"] == 0
    assert (first / "survey" / "llama.json").read_bytes() == (second / "survey" / "llama.json").read_bytes()


def test_a_survey_waits_for_one_already_filling_the_shared_cache_and_reads_its_rows(tmp_path, monkeypatch):
    """Two builds on a cold machine survey one model type once: a second survey finding the shared cache's lock
    held waits, then reads the row the holder wrote instead of computing it beside it."""
    import shutil
    import time

    from generator.shared_rows import computing
    from generator.survey.run import survey_all

    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "first-cache"))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "first"))
    survey_all(["llama"], progress=lambda line: None)
    shared = tmp_path / "cache" / "survey"
    env = {"NNCANON_CACHE": str(tmp_path / "cache"), "NNCANON_BUILD": str(tmp_path / "second")}
    with computing(shared):
        waiting = subprocess.Popen([sys.executable, "-m", "generator", "survey", "llama"], cwd=ROOT, text=True,
                                   env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # until it has the lock file open (it then waits in flock): Linux lists a process's open files in /proc
        lock = str(shared / ".lock")
        while waiting.poll() is None and lock not in _open_files(waiting.pid):
            time.sleep(0.05)
        assert waiting.poll() is None, f"the survey did not wait for the lock: {waiting.communicate()[0]}"
        shutil.copy(tmp_path / "first-cache" / "survey" / "llama.json", shared / "llama.json")  # the holder's row
    out, _ = waiting.communicate(timeout=HANG)
    assert waiting.returncode == 0, out
    assert "0 surveyed now" in out and "survey llama:" not in out, out


def _open_files(pid: int) -> set[str]:
    try:
        return {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:  # it exited, or closed a file between the listing and the readlink
        return set()


def _cli(*args: str, env: dict | None = None, base: dict | None = None) -> subprocess.CompletedProcess:
    """``generator survey`` in a subprocess, in ``base`` (this process's environment) updated by ``env``."""
    return subprocess.run([sys.executable, "-m", "generator", "survey", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**(os.environ if base is None else base), "PYTHONPATH": str(ROOT),
                                          **(env or {})})


def test_an_unknown_model_type_is_one_line(tmp_path):
    done = _cli("no_such_model", env={"NNCANON_BUILD": str(tmp_path / "build")})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: 'no_such_model' is on none of transformers")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_facts_are_the_same_under_every_capability(tmp_path):
    """A hybrid with recurrences (qwen3_next), GPT-2 and Llama, surveyed under each CPU's kernels: the cached
    facts are byte-identical (they hold names and verdicts, never a measured number)."""
    types = ["llama", "gpt2", "qwen3_next"]
    found = {}
    for capability in capabilities():
        build = tmp_path / capability
        done = _cli(*types, base=environment(capability, NNCANON_BUILD=str(build)))
        assert done.returncode == 0, done.stderr
        found[capability] = {t: (build / "survey" / f"{t}.json").read_bytes() for t in types}
    native = found["native"]
    assert all(json.loads(native[t])["facts"]["wraps"] for t in types)
    for capability, files in found.items():
        for t in types:
            assert files[t] == native[t], (capability, t)
