"""Mamba-1's selective scan (the mamba and falcon_mamba families, `nncanon.parts.recurrent.selective_scan`) against an
independent recomputation: the scan's inputs against plain PyTorch hooks on the mixer's own projections (and, on
Falcon-Mamba, the B, C and dt RMS norms written out here), every token's state and output against this file's own
float64 scan of the Mamba-1 recurrence, ``states[:, t]`` against the recurrent state transformers' own forward
leaves in its cache for the prompt cut after token t, decode steps chaining ``state_input`` to the previous
``state_output``, an edit of ``state_input`` landing as the recurrence from the edited state says, and the
shared vocabulary: ``states`` per token on DeltaNet, Mamba-1 (and Jamba's Mamba blocks) and Mamba-2 alike under
``route_kernels``; Jamba's block kinds by its attention and expert periods."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from release_cache import cache_of

import nncanon
from generator.recipe.family import get_family

PROMPT = "The cat sat on the mat because it was warm, and the dog slept."
BLOCK = 1
FAMILIES = ("mamba", "falcon_mamba")


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(request.param)))


@pytest.fixture(scope="module")
def ids(model):
    return model.tokenizer(PROMPT, return_tensors="pt")["input_ids"]


def mixer_of(model):
    return model.layers[BLOCK].mixer


def rms(x, eps):
    """A weightless RMSNorm, written out (Falcon-Mamba's dt, B and C norms)."""
    x32 = x.float()
    return (x32 / torch.sqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def scan64(x, delta, A, B, C, D, state=None):
    """The Mamba-1 recurrence in float64 on transformers' layouts, from the paper: per channel d and state dim n,
    h[d, n] <- exp(delta[d] A[d, n]) h[d, n] + delta[d] B[n] x[d]; y[d] = sum_n C[n] h[d, n] + D[d] x[d].
    x, delta: [b, s, d]; B, C: [b, s, n]; A: [d, n]; state: [b, d, n]. Returns y [b, s, d], states [b, s, d, n]."""
    x, delta, A, B, C, D = (t.detach().double() for t in (x, delta, A, B, C, D))
    h = torch.zeros(x.shape[0], x.shape[2], A.shape[1], dtype=torch.float64) if state is None else state.double()
    ys, hs = [], []
    for t in range(x.shape[1]):
        h = torch.exp(delta[:, t, :, None] * A) * h + (delta[:, t] * x[:, t])[..., None] * B[:, t, None, :]
        ys.append((h * C[:, t, None, :]).sum(-1) + D * x[:, t])
        hs.append(h)
    return torch.stack(ys, 1), torch.stack(hs, 1)


def hooked(model, ids, names, route="fla"):
    """The mixer's values ``names`` read in one trace, and what plain forward hooks on in_proj, x_proj (input and
    output) and the mixer itself saw in the same forward."""
    mixer = mixer_of(model)
    module = mixer._module
    seen = {}

    def keep(name, what):
        def hook(module, args, output):  # returns None: the forward's own output goes on unchanged
            seen.setdefault(name, what(args, output))
        return hook

    handles = [
        module.in_proj.register_forward_hook(keep("in_proj", lambda a, o: o.detach())),
        module.x_proj.register_forward_hook(keep("x_proj", lambda a, o: (a[0].detach(), o.detach()))),
        module.register_forward_hook(keep("mixer", lambda a, o: o.detach())),
    ]
    saved = {}
    try:
        with nncanon.route_kernels(model.family, route), torch.no_grad(), model.trace(ids):
            for name in names:  # a loop, not a comprehension: nnsight runs the block's own frame
                saved[name] = getattr(mixer, name).save()
    finally:
        for handle in handles:
            handle.remove()
    return saved, seen


def _plain_inputs(model, seen):
    """(x, delta, B, C, z) from the plain hooks, the norms written out on Falcon-Mamba."""
    module = mixer_of(model)._module
    x, proj = seen["x_proj"]
    dt_in, B, C = proj.split([module.time_step_rank, module.ssm_state_size, module.ssm_state_size], dim=-1)
    if model.family == "falcon_mamba":
        dt_in, B, C = (rms(t, module.rms_eps) for t in (dt_in, B, C))
    delta = F.softplus(dt_in.double() @ module.dt_proj.weight.detach().double().T
                       + module.dt_proj.bias.detach().double())
    z = seen["in_proj"].chunk(2, dim=-1)[1]
    return x, delta, B, C, z


def test_scan_inputs_are_the_hooked_projections(model, ids):
    saved, seen = hooked(model, ids, ["attention_values", "time_steps", "decay_rates", "decays", "attention_keys",
                                      "attention_queries"])
    module = mixer_of(model)._module
    x, delta, B, C, _ = _plain_inputs(model, seen)
    assert saved["attention_values"].shape == (*x.shape, 1)  # a channel is a head of value_dim 1
    assert torch.equal(saved["attention_values"][..., 0], x)
    assert saved["attention_keys"].shape == (*B.shape[:2], 1, B.shape[-1])  # key_heads 1
    # the same float32 ops on the same tensors (the norm: one mean over state_size <= 16): the STEP level
    torch.testing.assert_close(saved["attention_keys"][:, :, 0], B, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(saved["attention_queries"][:, :, 0], C, atol=1e-5, rtol=1e-5)
    # time_steps: softplus of a projection over time_step_rank <= 8, float32 against float64: the STEP level
    torch.testing.assert_close(saved["time_steps"].double(), delta, atol=1e-5, rtol=1e-5)
    A = -torch.exp(module.A_log.detach().float())
    assert saved["decay_rates"].shape == tuple(module.A_log.shape) and torch.equal(saved["decay_rates"], A)
    torch.testing.assert_close(saved["decays"].double(), delta[..., None] * A.double(), atol=1e-5, rtol=1e-5)


def test_falcon_mambas_norms_are_there():
    """Falcon-Mamba's B and C are the normed x_proj columns, not the raw ones (so Mamba's relation fails on it).
    Falcon-Mamba's own check: not over the ``model`` fixture's families (on mamba it could only skip)."""
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("falcon_mamba")))
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    saved, seen = hooked(model, ids, ["attention_keys"])
    module = mixer_of(model)._module
    raw = seen["x_proj"][1][..., module.time_step_rank:module.time_step_rank + module.ssm_state_size]
    assert (saved["attention_keys"][:, :, 0] - raw).abs().max() > 1e-2
    torch.testing.assert_close(saved["attention_keys"][:, :, 0].pow(2).mean(-1), torch.ones(raw.shape[:2]),
                               atol=1e-4, rtol=0)


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_outputs_and_states_are_my_float64_scan(model, ids, route):
    """attention_head_outputs, state_output (and on the route every token's state) against this file's scan of
    the hooked inputs, and the mixer's output against out_proj(y · silu(z))."""
    names = (["states"] if route == "torch" else []) + ["attention_head_outputs", "state_output"]
    saved, seen = hooked(model, ids, names, route=route)
    module = mixer_of(model)._module
    x, delta, B, C, z = _plain_inputs(model, seen)
    A = -torch.exp(module.A_log.detach().double())
    y, hs = scan64(x, delta, A, B, C, module.D)
    # float32 scans over <= 32 tokens, state <= 12, channels' values O(1), against float64: the SUBBLOCK level
    torch.testing.assert_close(saved["attention_head_outputs"][..., 0].double(), y, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(saved["state_output"][..., 0].double(), hs[:, -1], atol=1e-4, rtol=1e-4)
    if route == "torch":
        assert saved["states"].shape == (*hs.shape, 1)
        torch.testing.assert_close(saved["states"][..., 0].double(), hs, atol=1e-4, rtol=1e-4)
    gated = (y * F.silu(z.double())).float()
    torch.testing.assert_close(module.out_proj(gated), seen["mixer"], atol=1e-4, rtol=1e-4)


def test_states_are_the_native_cache_of_the_cut_prompt(model, ids):
    mixer = mixer_of(model)
    with nncanon.route_kernels(model.family, "torch"), torch.no_grad(), model.trace(ids):
        states = mixer.states.save()
    for t in (0, 5, ids.shape[1] - 1):
        with torch.no_grad():  # the plain Hugging Face forward, no nncanon in the way
            out = model._module(ids[:, :t + 1], use_cache=True)
        native = cache_of(out).get_recurrent_state(BLOCK, state_idx=0)  # [batch, channels, state_size]
        # the token route's recurrence against transformers' own loop of the cut prompt: the same float32 ops
        # in the same order per token, to the STEP level
        torch.testing.assert_close(states[:, t, ..., 0], native, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_decode_steps_chain_states(model, ids, route):
    mixer = mixer_of(model)
    steps = []
    with nncanon.route_kernels(model.family, route), torch.no_grad():
        with model.generate(ids[:, :12], max_new_tokens=3, min_new_tokens=3, do_sample=False) as tracer:
            for _ in tracer.iter[:3]:
                steps.append({"x": mixer.attention_values.save(), "state_input": mixer.state_input.save(),
                              "state_output": mixer.state_output.save()})
    assert steps[0]["state_input"] is None and steps[0]["x"].shape[1] == 12
    for i in (1, 2):
        assert steps[i]["x"].shape[1] == 1
        assert torch.equal(steps[i]["state_input"], steps[i - 1]["state_output"])
        assert not torch.equal(steps[i]["state_input"], steps[i]["state_output"])


@pytest.mark.parametrize("route", ["fla", "torch"])
def test_generation_matches_a_plain_model(model, ids, route):
    """The tap serves Mamba-2's call shape for Mamba-1's two kernels and gates after it: greedy decoding through
    it, on either route, gives a separately loaded plain model's tokens and logits."""
    from transformers import AutoModelForCausalLM

    from generator.checkpoint.checkpoints import checkpoint_dir

    plain = AutoModelForCausalLM.from_pretrained(checkpoint_dir(get_family(model.family)))
    kwargs = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False, output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        expected = plain.generate(ids[:, :12], **kwargs)
        with nncanon.route_kernels(model.family, route):
            got = model._module.generate(ids[:, :12], **kwargs)
    assert torch.equal(got.sequences, expected.sequences)
    for mine, theirs in zip(got.scores, expected.scores):
        # whole forwards of 3 blocks on two routes: the SUBBLOCK level (nncanon/core/precision.py)
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)


def test_an_edit_of_state_input_lands(model, ids):
    """Halving the decode step's state_input changes its output exactly as the recurrence from the halved state
    says (this file's scan of the step's own inputs), and the cache keeps the state that edit leads to."""
    mixer = mixer_of(model)
    module = mixer._module
    with torch.no_grad(), model.generate(ids[:, :12], max_new_tokens=2, min_new_tokens=2, do_sample=False) as tracer:
        for step in tracer.iter[:2]:
            if step == 1:
                before = mixer.state_input.save()
                mixer.state_input = mixer.state_input * 0.5
                x = mixer.attention_values.save()
                steps = mixer.time_steps.save()
                B = mixer.attention_keys.save()
                C = mixer.attention_queries.save()
                y = mixer.attention_head_outputs.save()
                after = mixer.state_output.save()
    A = -torch.exp(module.A_log.detach().double())
    expected, hs = scan64(x[..., 0], steps, A, B[:, :, 0], C[:, :, 0], module.D, state=before[..., 0] * 0.5)
    # one token's update in float32 against float64, over state_size <= 12: the STEP level
    torch.testing.assert_close(y[..., 0].double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(after[..., 0].double(), hs[:, -1], atol=1e-5, rtol=1e-5)
    unedited, _ = scan64(x[..., 0], steps, A, B[:, :, 0], C[:, :, 0], module.D, state=before[..., 0])
    assert (unedited - expected).abs().max() > 1e-3


@pytest.mark.parametrize("family", ["mamba", "jamba", "mamba2", "qwen3_5_text"])
def test_one_vocabulary_of_states(family):
    """DeltaNet, Mamba-1 (alone and in Jamba's hybrid stack) and Mamba-2 serve the state under the same names and layout: under route_kernels every
    token's state is ``states [batch, seq, heads, key_dim, value_dim]`` (the family's dim_sizes), its last is
    ``state_output``."""
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family(family)))
    mixer = {"qwen3_5_text": "linear_attn", "jamba": "mamba"}.get(family, "mixer")
    mixer = getattr(model.layers[0], mixer)  # block 0 is a recurrent block on each
    sizes = model.dim_sizes()
    with nncanon.route_kernels(family, "torch"), torch.no_grad():
        with model.trace(PROMPT):
            states = mixer.states.save()
            final = mixer.state_output.save()
    assert states.shape[2:] == (sizes["heads"], sizes["key_dim"], sizes["value_dim"])
    torch.testing.assert_close(states[:, -1], final, atol=1e-5, rtol=1e-5)


def test_jambas_blocks_follow_its_periods():
    """Jamba's block i is attention when i % attn_layer_period == attn_layer_offset, else Mamba-1; its MLP a mixture
    when i % expert_layer_period == expert_layer_offset: each block has the one mixer its kind says, and an MLP host
    of its kind, and its Mamba blocks' B and C are its RMSNorms' outputs (with their gains)."""
    from generator.checkpoint.checkpoints import checkpoint_dir

    model = nncanon.load(checkpoint_dir(get_family("jamba")))
    config = model.text_config
    for i, block in enumerate(model.layers):
        attention = i % config.attn_layer_period == config.attn_layer_offset
        sparse = i % config.expert_layer_period == config.expert_layer_offset
        native = block._module
        assert hasattr(native, "self_attn") == attention and hasattr(native, "mamba") == (not attention)
        assert type(native.feed_forward).__name__ == ("JambaSparseMoeBlock" if sparse else "JambaMLP")
    i = config.layers_block_type.index("mamba")
    module = model.layers[i].mamba._module
    seen = {}

    def hook(mod, args, output):
        seen.setdefault("x_proj", output.detach())

    handle = module.x_proj.register_forward_hook(hook)
    try:
        with torch.no_grad(), model.trace(PROMPT):
            B = model.layers[i].mamba.attention_keys.save()
    finally:
        handle.remove()
    raw = seen["x_proj"][..., module.time_step_rank:module.time_step_rank + module.ssm_state_size]
    expected = module.b_layernorm.weight.detach() * rms(raw, module.b_layernorm.variance_epsilon)
    # one mean over state_size <= 16 and a product: the STEP level
    torch.testing.assert_close(B[:, :, 0], expected, atol=1e-5, rtol=1e-5)
