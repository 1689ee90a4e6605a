"""The DeltaNet mixer (linear_attn): its values, route_kernels, state, states, decode steps.

Truths come from plain PyTorch hooks on the Hugging Face module and the module's own math
written out here (an independent delta rule in float64), from transformers' pure-torch
reference kernels, or from another run (a prompt cut short, an unpadded prompt).
The "flash-linear-attention installed" case runs in a subprocess with a stand-in ``fla``
package (tests/stand_in_fla; the real fla kernels need a GPU).
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from delta_math import (
    KERNEL_VALUES,
    assert_values_match_the_module_math,
    close,
    delta_rule,
    differs,
)
from float_error import forward_roundings
from limits import HANG
from plain_hooks import mixer_calls

import nncanon
from nncanon.core import kernels
from nncanon.parts.recurrent import deltanet

DELTA = 1  # a DeltaNet block of the tiny checkpoint (layer_types: linear x3 + full, twice)
LINEAR = (0, 1, 2, 4, 5, 6)
ROUTE = 'route_kernels(model.family, "torch")'
TEXT = " ".join(["The cat sat on the mat because it was warm, and the dog ran after a ball in the garden."] * 6)


@pytest.fixture
def torch_route(model):
    with nncanon.route_kernels(model.family, "torch"):
        yield


@pytest.fixture(scope="module")
def hf():
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe

    return modeling_qwen3_5_moe


@pytest.fixture(scope="module")
def long_ids(model):
    """150 tokens: longer than the chunked kernel's chunk (64), so it runs three chunks."""
    ids = model.tokenizer(TEXT, return_tensors="pt")["input_ids"][:, :150]
    assert ids.shape == (1, 150)
    return ids


def module_math(module, hidden, mask=None):
    """The DeltaNet's values by its own math (spec: "The DeltaNet mixer"), on a whole sequence."""
    x = hidden if mask is None else hidden * mask[:, :, None].to(hidden.dtype)
    seq = x.shape[1]
    mixed = module.in_proj_qkv(x).transpose(1, 2)
    mixed = F.silu(F.conv1d(mixed, module.conv1d.weight, padding=module.conv_kernel_size - 1,
                            groups=mixed.shape[1])[..., :seq]).transpose(1, 2)
    q, k, v = mixed.split([module.key_dim, module.key_dim, module.value_dim], dim=-1)
    q = q.unflatten(-1, (-1, module.head_k_dim))
    k = k.unflatten(-1, (-1, module.head_k_dim))
    v = v.unflatten(-1, (-1, module.head_v_dim))
    beta = torch.sigmoid(module.in_proj_b(x))
    g = -module.A_log.float().exp() * F.softplus(module.in_proj_a(x).float() + module.dt_bias)
    z = module.in_proj_z(x).unflatten(-1, (-1, module.head_v_dim))
    return {"q": q, "k": k, "v": v, "beta": beta, "g": g, "z": z}


# -- route_kernels ----------------------------------------------------------------------


def test_route_kernels_validates_and_restores(model):
    assert kernels.route(model.family) == "fla"
    with pytest.raises(TypeError, match=r"route_kernels\(model.family"):
        nncanon.route_kernels(model, "torch")
    with pytest.raises(ValueError, match="no family 'no_such_family'"):
        nncanon.route_kernels("no_such_family", "torch")
    with pytest.raises(ValueError, match="'torch' or 'fla'"):
        nncanon.route_kernels(model.family, "triton")
    with nncanon.route_kernels(model.family, "torch") as routing:
        assert routing.previous == "fla" and kernels.route(model.family) == "torch"
    assert kernels.route(model.family) == "fla"
    routing = nncanon.route_kernels(model.family, "torch")  # a plain call stays in effect
    try:
        assert kernels.route(model.family) == "torch"
    finally:
        nncanon.route_kernels(model.family, "fla")
    assert not kernels.fla_bound(model.family), "this environment has no flash-linear-attention"


def test_support_without_fla(model, prompts):
    rows = {r.name: r for r in model.support() if r.host == "model.layers[i].linear_attn"}
    # in forward order (measured): the mixer's output last, the values this load does not serve after it
    assert list(rows)[-3:] == ["attention_output", "state", "states"]
    assert all(rows[name].available for name in ("attention_output", *KERNEL_VALUES))
    for name in ("state", "states"):
        assert not rows[name].available and ROUTE in rows[name].condition
    assert "materialized only when read" in rows["states"].condition
    with pytest.raises(nncanon.Unavailable, match=r'states needs nncanon\.route_kernels\(model\.family, "torch"\)'):
        with model.trace(prompts):
            model.layers[DELTA].linear_attn.states.save()
    with nncanon.route_kernels(model.family, "torch"):
        assert all(r.available for r in model.support() if r.host == "model.layers[i].linear_attn")


def test_printout_lists_state_and_states_after_attention_output(model):
    lines = [line.strip() for line in repr(model.layers[DELTA].linear_attn).splitlines()]
    names = [line.split(")")[0].lstrip("(") for line in lines if "->" in line]
    assert names[-3:] == ["attention_output", "state", "states"]
    assert names.index("state_output") == len(names) - 4


def test_states_size_is_computed_from_the_config(model):
    """The spec: 2 MiB per token per block on 35B-A3B, 4 MiB on 122B-A10B and 397B-A17B."""
    from generator.recipe.family import get_family

    family = get_family(model.family)
    for checkpoint, size in (("Qwen/Qwen3.5-35B-A3B", "2 MiB"), ("Qwen/Qwen3.5-122B-A10B", "4 MiB"),
                             ("Qwen/Qwen3.5-397B-A17B", "4 MiB")):
        config = family.checkpoint_config(checkpoint)  # the full-size config.json, from the family YAML
        assert f"{size} per token per block" in deltanet.states_note(config), checkpoint
    assert deltanet.state_bytes_per_token(family.checkpoint_config("Qwen/Qwen3.5-35B-A3B")) == 32 * 128 * 128 * 4
    config = model.text_config
    assert deltanet.state_bytes_per_token(config) == (
        config.linear_num_value_heads * config.linear_key_head_dim * config.linear_value_head_dim * 4)
    states = next(v for v in type(model.layers[DELTA].linear_attn).values() if v.name == "states")
    assert states.extra["bytes_per_token"] is deltanet.state_bytes_per_token


# -- the values against the module's own math --------------------------------------------


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_values_match_the_module_math(model, prompts, route):
    with nncanon.route_kernels(model.family, route):
        got = assert_values_match_the_module_math(model, DELTA, prompts, module_math)
    assert got["state_input"] is None


def test_queries_and_keys_at_the_key_head_count(model, prompts, hf):
    """The spec serves them num_v_heads wide; transformers 5.23 repeats them inside the kernel."""
    la, config = model.layers[DELTA].linear_attn, model.text_config
    with model.trace(prompts):
        q, k, v = la.attention_queries.save(), la.attention_keys.save(), la.attention_values.save()
        g, beta, y = la.decays.save(), la.betas.save(), la.attention_head_outputs.save()
    assert q.shape[2:] == k.shape[2:] == (config.linear_num_key_heads, config.linear_key_head_dim)
    assert v.shape[2:] == (config.linear_num_value_heads, config.linear_value_head_dim)
    assert config.linear_num_value_heads == 2 * config.linear_num_key_heads
    chunked = inspect.unwrap(hf.torch_chunk_gated_delta_rule)
    run = dict(g=g, beta=beta, use_qk_l2norm_in_kernel=True)
    # value heads 2j and 2j + 1 read key head j: repeat_interleave, not a tiling
    interleaved, _ = chunked(q.repeat_interleave(2, 2), k.repeat_interleave(2, 2), v, **run)
    tiled, _ = chunked(q.repeat(1, 1, 2, 1), k.repeat(1, 1, 2, 1), v, **run)
    assert torch.equal(interleaved, y)
    assert differs(tiled, y)


# -- the token-by-token route --------------------------------------------------------


def read_prompt(model, ids, states=False):
    got = {}
    with model.trace(ids):
        for layer in LINEAR:
            la = model.layers[layer].linear_attn
            if layer == DELTA:
                got["args"] = la.attention_queries.save(), la.attention_keys.save(), la.attention_values.save()
                got["gates"] = la.decays.save(), la.betas.save()
            if states:
                got[f"states{layer}"] = la.states.save()
            got[f"y{layer}"] = la.attention_head_outputs.save()
            got[f"state{layer}"] = la.state_output.save()
        got["logits"] = model.logits.save()
    return got


def test_token_route_reproduces_the_chunked_route(model, long_ids, hf):
    config = model.text_config
    heads, key_dim, value_dim = config.linear_num_value_heads, config.linear_key_head_dim, config.linear_value_head_dim
    chunked = read_prompt(model, long_ids)
    with nncanon.route_kernels(model.family, "torch"):
        token = read_prompt(model, long_ids, states=True)
    # the two routes differ from the first DeltaNet block on, and every later value carries that difference:
    # each is held to the chain of roundings of the whole 150-token forward, which bounds every prefix of it
    chain = forward_roundings(config, 150)
    for layer in LINEAR:  # served whole, all 150 tokens, not one chunk
        assert token[f"y{layer}"].shape == chunked[f"y{layer}"].shape == (1, 150, heads, value_dim)
        assert token[f"states{layer}"].shape == (1, 150, heads, key_dim, value_dim)
        assert token[f"states{layer}"].dtype == torch.float32
        close(token[f"y{layer}"], chunked[f"y{layer}"], chain)
        close(token[f"state{layer}"], chunked[f"state{layer}"], chain)
        assert torch.equal(token[f"states{layer}"][:, -1], token[f"state{layer}"])
    close(token["logits"], chunked["logits"], chain)
    assert not torch.equal(token[f"y{DELTA}"], chunked[f"y{DELTA}"]), "two different kernels ran"
    # the route's kernel is transformers' recurrent reference, to the bit
    q, k, v = token["args"]
    g, beta = token["gates"]
    y, state = inspect.unwrap(hf.torch_recurrent_gated_delta_rule)(
        q, k, v, g=g, beta=beta, output_final_state=True, use_qk_l2norm_in_kernel=True)
    assert torch.equal(y, token[f"y{DELTA}"]) and torch.equal(state, token[f"state{DELTA}"])


def test_states_equal_the_state_of_the_prompt_cut_after_each_token(model, long_ids):
    with nncanon.route_kernels(model.family, "torch"), model.trace(long_ids):
        states = model.layers[DELTA].linear_attn.states.save()
        last = model.layers[LINEAR[-1]].linear_attn.states.save()
    for t in (0, 1, 2, 62, 63, 64, 65, 100, 127, 128, 149):
        with model.trace(long_ids[:, : t + 1]):  # the chunked kernel, on the cut prompt
            cut = model.layers[DELTA].linear_attn.state_output.save()
            cut_last = model.layers[LINEAR[-1]].linear_attn.state_output.save()
        # the later block carries the earlier blocks' difference between the two routes
        chain = forward_roundings(model.text_config, t + 1)
        close(states[:, t], cut, chain)
        close(last[:, t], cut_last, chain)
    assert differs(states[:, 65], states[:, 64])


def test_state_iterated_over_a_five_token_prompt(model, long_ids, torch_route):
    ids = long_ids[:, :5]
    la = model.layers[DELTA].linear_attn
    with model.trace(ids):
        states = la.states.save()
    got = []
    with model.trace(ids) as tracer:
        for _ in tracer.iter[:5]:
            got.append(la.state.save())
    assert len(got) == 5 and states.shape[1] == 5
    for t, state in enumerate(got):
        assert torch.equal(state, states[:, t])
    assert all(not torch.equal(got[t], got[t + 1]) for t in range(4))


def test_editing_state_lands_in_later_tokens(model, long_ids, torch_route):
    ids, la = long_ids[:, :5], model.layers[DELTA].linear_attn
    with model.trace(ids):
        plain = la.attention_head_outputs.save()
    with model.trace(ids) as tracer:
        for step in tracer.iter[:5]:
            if step == 2:
                la.state = la.state * 0
        edited = la.attention_head_outputs.save()
    assert torch.equal(edited[:, :2], plain[:, :2])
    assert edited[:, 2].abs().max() == 0, "token 2's output is read from its (zeroed) state"
    assert differs(edited[:, 3:], plain[:, 3:])


def test_states_are_built_only_when_read(model, long_ids, torch_route, monkeypatch):
    built = []
    stack = kernels._stack
    monkeypatch.setattr(kernels, "_stack", lambda states: built.append(len(states)) or stack(states))
    with model.trace(long_ids[:, :20]):
        for layer in LINEAR:
            model.layers[layer].linear_attn.state_output.save()
    assert built == []
    with model.trace(long_ids[:, :20]):
        model.layers[DELTA].linear_attn.states.save()
    assert built == [20]
    built.clear()
    with model.generate(long_ids[:, :20], max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
        for _ in tracer.iter[2]:
            model.layers[DELTA].linear_attn.states.save()
    assert built == [1], "only the decode step asked for"


# -- decode steps -------------------------------------------------------------------


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_decode_steps_chain_states(model, long_ids, route):
    ids, la, module = long_ids[:, :12], model.layers[DELTA].linear_attn, model._module.model.layers[DELTA].linear_attn
    steps, prompt_states = [], []
    with nncanon.route_kernels(model.family, route), mixer_calls(model, DELTA) as seen:
        with model.generate(ids, max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
            for step in tracer.iter[:3]:
                values = {name: getattr(la, name).save() for name in KERNEL_VALUES[:-2]}
                if route == "torch" and step == 0:
                    prompt_states.append(la.states.save())
                values["y"], values["state_output"] = la.attention_head_outputs.save(), la.state_output.save()
                steps.append(values)
    assert steps[0]["state_input"] is None
    key_heads = (model.text_config.linear_num_key_heads, model.text_config.linear_key_head_dim)
    assert steps[0]["attention_queries"].shape == (1, 12, *key_heads)
    for i in (1, 2):
        assert steps[i]["attention_queries"].shape == (1, 1, *key_heads)
        assert torch.equal(steps[i]["state_input"], steps[i - 1]["state_output"])
        # a copy: the cache's buffer is overwritten by this step's state afterwards
        assert not torch.equal(steps[i]["state_input"], steps[i]["state_output"])
    if route == "torch":
        assert torch.equal(prompt_states[0][:, -1], steps[0]["state_output"])
    # every step's values are the module's math on the whole sequence so far, at the step's token
    hidden = torch.cat([h for h, _, _ in seen], dim=1)
    with torch.no_grad():
        truth = module_math(module, hidden)
        y, states = delta_rule(truth["q"], truth["k"], truth["v"], truth["g"], truth["beta"])
    for i, values in enumerate(steps):
        at = slice(0, 12) if i == 0 else slice(11 + i, 12 + i)
        close(values["attention_queries"], truth["q"][:, at])
        close(values["attention_keys"], truth["k"][:, at])
        close(values["attention_values"], truth["v"][:, at])
        close(values["decays"], truth["g"][:, at])
        close(values["betas"], truth["beta"][:, at])
        close(values["y"], y[:, at].float())
        close(values["state_output"], states[:, at.stop - 1].float())


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_editing_state_input_at_a_decode_step(model, long_ids, route):
    ids, la = long_ids[:, :12], model.layers[DELTA].linear_attn

    def run(edit):
        logits = []
        with nncanon.route_kernels(model.family, route):
            with model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
                for step in tracer.iter[:2]:
                    if step == 1 and edit == "zero":
                        la.state_input = la.state_input * 0
                    elif step == 1 and edit == "same":
                        la.state_input = la.state_input
                    logits.append(model.logits.save())
        return logits

    plain, zeroed, same = run(None), run("zero"), run("same")
    assert torch.equal(zeroed[0], plain[0])
    # one block of a tiny random model moves the logits little, but a run is deterministic (see
    # "same"), so any difference is the edit's
    # a difference, not a bound: the runs are deterministic, so anything above 0 is the edit; 1e-5 keeps it clear
    assert (zeroed[1] - plain[1]).abs().max() > 1e-5
    assert torch.equal(same[1], plain[1])


# -- padding ------------------------------------------------------------------------


def test_left_padding_does_not_leak_under_the_torch_route(model, prompts, torch_route):
    la = model.layers[DELTA].linear_attn
    with model.trace(prompts):
        mask = model.attention_mask.save()
        states = la.states.save()
        batch = model.logits.save()
    padded = int((mask == 0).any(dim=1).nonzero()[0])
    pad = int((mask[padded] == 0).sum())
    assert pad > 0
    assert states[padded, :pad].abs().max() == 0, "padded positions write nothing into the state"
    for row, prompt in enumerate(prompts):
        with model.trace(prompt):
            alone_state = la.state_output.save()
            alone = model.logits.save()
        close(batch[row, -1], alone[0, -1], forward_roundings(model.text_config, mask.shape[1]))
        close(states[row, -1], alone_state[0])


# -- flash-linear-attention installed (a stand-in) --------------------------------------

STAND_IN = Path(__file__).parent / "stand_in_fla"

CHILD = r'''
import json, sys
import torch
import fla
import nncanon
from nncanon.core import kernels
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf

NAMES = json.loads(sys.argv[2])
model = nncanon.load(sys.argv[1])
la = model.layers[1].linear_attn
ids = model.tokenizer("The cat sat on the mat because it was warm.", return_tensors="pt")["input_ids"]
report = {"fla": fla.__file__, "stand_in": getattr(fla, "STAND_IN", False),
          "bound": [kernels.bound(hf.torch_chunk_gated_delta_rule) is fla.chunk_gated_delta_rule,
                    kernels.bound(hf.torch_recurrent_gated_delta_rule) is fla.fused_recurrent_gated_delta_rule],
          "fla_bound": kernels.fla_bound(model.family), "phases": {}}

def phase(name):
    before = dict(fla.calls)
    errors = {}
    for value in NAMES:
        try:
            with model.trace(ids):
                getattr(la, value).save()
            errors[value] = None
        except nncanon.Unavailable as error:
            errors[value] = str(error)
    with model.trace(ids):
        out = la.attention_output.save()
    with model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False):
        pass
    support = {r.name: r.available for r in model.support() if r.host == "model.layers[i].linear_attn"}
    calls = {k: fla.calls[k] - before[k] for k in before}
    report["phases"][name] = {"errors": errors, "support": support, "calls": calls, "out": out.tolist()}

phase("fla")
nncanon.route_kernels(model.family, "torch")
phase("torch")
nncanon.route_kernels(model.family, "fla")
phase("fla again")
print(json.dumps(report))
'''


def test_with_flash_linear_attention_installed(checkpoint, model):
    """transformers binds the fla kernels when its modeling module is imported, so the case runs in a
    fresh interpreter whose sys.path has the stand-in fla package (the real one needs a GPU)."""
    names = ["attention_output", *KERNEL_VALUES, "state", "states"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(STAND_IN), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", CHILD, str(checkpoint), json.dumps(names)], env=env,
                          capture_output=True, text=True, timeout=HANG, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["stand_in"] and Path(report["fla"]).is_relative_to(STAND_IN)
    assert report["bound"] == [True, True] and report["fla_bound"]

    fla_, torch_, again = (report["phases"][p] for p in ("fla", "torch", "fla again"))
    for phase in (fla_, again):
        assert phase["errors"]["attention_output"] is None and phase["support"]["attention_output"]
        for name in names[1:]:
            message = phase["errors"][name]
            assert message is not None and ROUTE in message, (name, message)
            assert message.startswith(f"model.layers[1].linear_attn.{name} is unavailable")
            assert not phase["support"][name]
        for name in KERNEL_VALUES:
            assert "flash-linear-attention" in phase["errors"][name]
        # the fla kernels ran: chunked on every prompt, recurrent on the decode step
        assert phase["calls"]["chunk_gated_delta_rule"] > 0 and phase["calls"]["fused_recurrent_gated_delta_rule"] > 0
    assert all(error is None for error in torch_["errors"].values()), torch_["errors"]
    assert all(torch_["support"].values())
    assert torch_["calls"] == {"chunk_gated_delta_rule": 0, "fused_recurrent_gated_delta_rule": 0}
    out = torch.tensor(torch_["out"])  # block 1's output, after block 0's mixer ran on each route
    close(out, torch.tensor(fla_["out"]), forward_roundings(model.text_config, out.shape[1]))
    assert fla_["out"] == again["out"]
    # kernels.assume_fla (for the encyclopedia's "fla installed" column) says what the real binding does
    with kernels.assume_fla(model.family):
        assumed = {r.name: r.available for r in model.support() if r.host == "model.layers[i].linear_attn"}
        with nncanon.route_kernels(model.family, "torch"):
            assumed_torch = {r.name: r.available for r in model.support() if r.host == "model.layers[i].linear_attn"}
    assert assumed == fla_["support"] and assumed_torch == torch_["support"]
    assert not kernels.fla_bound(model.family)
