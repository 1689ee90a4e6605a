"""``model.trace(prompt, remote=True)`` on standard values, through nnsight's own request protocol.

NDIF is unreachable here, so the network hop is the one thing replaced: ``RemoteBackend.request`` is
patched to hand the request nnsight built (envelope and ``RequestModel.serialize`` payload, after
``pull_env``, exactly as the real ``request`` serializes it) to tests/ndif_server.py, which runs nnsight's
server-side path in a process where nncanon cannot be imported, against a separately built copy of the
model loaded from the same hub cache. Its saves come back through ``RemoteBackend``'s own push into the
caller's frame. The truth is a local trace on an ordinary load of the checkpoint directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from float_error import forward_roundings, within
from limits import HANG

from generator.recipe.family import get_family

REPO_ID = "nncanon-tiny/llama"
MOE_ID = "nncanon-tiny/qwen3_5_moe_text"
PROMPT = "The cat sat on the mat because it was warm."
SERVER = Path(__file__).with_name("ndif_server.py")


@pytest.fixture(scope="module")
def llama_checkpoint():
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family("llama"))


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory, llama_checkpoint, checkpoint):
    from nncanon.core.hubcache import lay_out

    home = tmp_path_factory.mktemp("hf_home")
    lay_out(llama_checkpoint, REPO_ID, home)
    lay_out(checkpoint, MOE_ID, home)
    return home


@pytest.fixture
def ndif(monkeypatch, hf_home, tmp_path):
    """RemoteBackend with the server in a subprocess instead of behind a socket; the runs it served."""
    from huggingface_hub import constants
    from nnsight.intervention.backends.remote import RemoteBackend

    # huggingface_hub reads HF_HOME and HF_HUB_OFFLINE at import; the client resolves through these at call time
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(Path(hf_home) / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    runs = []

    def request(self, request, tracer):
        blob = self._serialize(tracer)  # pull_env + RequestModel.serialize, as the real request does
        paths = [tmp_path / f"{len(runs)}.{ext}" for ext in ("json", "blob", "pt")]
        paths[0].write_text(request.metadata())
        paths[1].write_bytes(blob)
        env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
        done = subprocess.run([sys.executable, str(SERVER), *map(str, paths)], env=env, capture_output=True,
                              text=True, timeout=HANG)
        assert done.returncode == 0, done.stderr[-3000:]
        result = torch.load(paths[2], weights_only=False)
        runs.append({"request": request, "bytes": len(blob), **result})
        return result["saves"]

    monkeypatch.setattr(RemoteBackend, "request", request)
    return runs


def test_a_remote_trace_reads_and_edits_standard_values_bit_for_bit(ndif, llama_checkpoint):
    """Reads at module outputs, at ops inside a forward (.source: the attention call's queries and keys,
    which the server's modules get installed for the run) and an edit, all equal to the local trace."""
    import nncanon

    model = nncanon.load(REPO_ID)  # a hub id: meta-first, nothing but the config and tokenizer read
    assert not model.dispatched
    with model.trace(PROMPT, remote=True):
        model.layers[0].mlp.mlp_output[:] = 0
        queries = model.layers[1].self_attn.attention_queries.save()
        keys = model.layers[1].self_attn.attention_keys.save()
        attention = model.layers[1].self_attn.attention_output.save()
        mid = model.layers[1].layer_mid.save()
        logits = model.logits.save()
    [run] = ndif
    assert run["model_class"] == "TransformersModel" and not run["nncanon_loaded"] and run["hooks_left"] == 0
    assert run["request"].model_key.startswith("nnsight.modeling.transformers.TransformersModel:")
    assert f'"repo_id": "{REPO_ID}"' in run["request"].model_key
    assert not model.dispatched, "a remote-only run never loads the weights here"
    assert all(p.device.type == "meta" for p in model._module.parameters())

    local = nncanon.load(llama_checkpoint)
    with local.trace(PROMPT):
        local.layers[0].mlp.mlp_output[:] = 0
        want_queries = local.layers[1].self_attn.attention_queries.save()
        want_keys = local.layers[1].self_attn.attention_keys.save()
        want_attention = local.layers[1].self_attn.attention_output.save()
        want_mid = local.layers[1].layer_mid.save()
        want_logits = local.logits.save()
    with local.trace(PROMPT):
        unedited = local.logits.save()
    assert torch.equal(attention, want_attention) and torch.equal(mid, want_mid)
    assert torch.equal(queries, want_queries) and torch.equal(keys, want_keys)
    assert torch.equal(logits, want_logits)
    assert not torch.equal(logits, unedited), "the edit reached the server's forward"


def test_a_hybrid_mixture_remotely(ndif, checkpoint, model, prompts):
    """Qwen3.5-MoE (a wrapper checkpoint the server loads as Qwen3_5MoeForCausalLM, as nncanon does):
    DeltaNet values (the family's kernel taps), router logits (unflattened by the token-shape hook) and an
    edit, over a left-padded batch; the server's modules keep no hook after the run."""
    import nncanon

    remote = nncanon.load(MOE_ID)
    with remote.trace(prompts, remote=True):
        remote.layers[0].linear_attn.attention_output[:] = 0
        router = remote.layers[0].mlp.router_logits.save()
        attention = remote.layers[3].self_attn.attention_output.save()
        logits = remote.logits.save()
    [run] = ndif
    assert not run["nncanon_loaded"] and run["hooks_left"] == 0 and not remote.dispatched
    with model.trace(prompts):
        model.layers[0].linear_attn.attention_output[:] = 0
        want_router = model.layers[0].mlp.router_logits.save()
        want_attention = model.layers[3].self_attn.attention_output.save()
        want_logits = model.logits.save()
    assert router.shape[:2] == tuple(want_logits.shape[:2])
    # block 0's router reads the edited stream through the same plain modules on both sides: to the bit
    assert torch.equal(router, want_router)
    # past block 0 the two forwards are different code (the server's plain modules, the local nncanon's
    # kernel taps and source-rewritten forwards), so vector kernels may round them differently on a CPU
    # without AVX-512: equal up to two orders of the forward's roundings
    chain = forward_roundings(model.text_config, logits.shape[1])
    within(attention, want_attention, chain)
    within(logits, want_logits, chain)


def test_a_local_directory_cannot_run_remotely(llama_checkpoint):
    import nncanon
    from nncanon.core.remote import NotRemotable

    local = nncanon.load(llama_checkpoint)
    with pytest.raises(NotRemotable, match="load it by its id") as raised:
        with local.trace(PROMPT, remote=True):
            local.logits.save()
    assert "\n" not in str(raised.value)


def test_shipped_code_has_no_zero_argument_super():
    """nnsight recompiles shipped methods without a __class__ cell (nncanon/core/remote.py)."""
    root = Path(__file__).resolve().parent.parent / "nncanon"
    offenders = [f"{path.relative_to(root)}:{n}" for path in root.rglob("*.py")
                 if path.name not in ("processing.py", "sae.py")
                 for n, line in enumerate(path.read_text().splitlines(), 1) if "super()." in line]
    assert not offenders, offenders


def test_shipped_code_has_no_lru_cache():
    """An lru_cache wrapper pickles by reference, so a remote trace that reaches one asks the server (no nncanon
    there) to import nncanon; shipped modules cache in plain dicts. The registry is the client's alone."""
    root = Path(__file__).resolve().parent.parent / "nncanon"
    offenders = [f"{path.relative_to(root)}:{n}" for path in root.rglob("*.py")
                 if path.relative_to(root).as_posix() != "families/__init__.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if line.lstrip().startswith(("@functools.cache", "@functools.lru_cache", "@lru_cache", "@cache"))]
    assert not offenders, offenders
