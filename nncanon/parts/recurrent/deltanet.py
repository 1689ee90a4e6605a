"""The gated DeltaNet mixer (``linear_attn``) of Qwen3.5, Qwen3.5-MoE and Qwen3-Next.

Its interior values are the delta-rule kernel's arguments and results, read at the point
`nncanon.core.kernels` serves for whichever kernel the call runs (chunked on a prompt, recurrent
on a decode step, token by token on every call once routed to torch). They are served from
transformers' pure-torch kernels only: with flash-linear-attention installed, transformers
binds fla's fused kernels at import and every value read at the kernel waits for
``nncanon.route_kernels(model.family, "torch")`` (`KERNEL_VALUES`); attention_output, the conv state, time_steps and
decay_rates are read outside it. ``state`` and ``states``
exist only on that route (`TOKEN_ROUTE`): only the token-by-token kernel holds the state
after each token of a prompt.

The decay ``g = -exp(A_log) · softplus(a + dt_bias)`` is Mamba-2's ``dt · A`` and takes its names:
``time_steps`` (the softplus, read where the forward computes it), ``decay_rates`` (A, read-only) and
``decays`` (g, at the kernel). The causal convolution's cache state is `conv`'s, shared with Mamba-2.
"""

from __future__ import annotations

from typing import Any

from ...core import kernels
from ...core.hosts import host
from ...core.layouts import Gates, LinearQK, LinearV, MaybeState, Residual, State, States, layout
from ...core.locators import Tap, op, own
from ...core.precision import RECURRENCE, SUBBLOCK
from ...core.relations import relation
from ...core.values import Condition, Value, View
from ...core.views import READ_ONLY
from . import conv

_KERNEL = "the kernel this call runs (a prompt's chunked one or a decode step's recurrent one)"
_ROUTE = 'nncanon.route_kernels(model.family, "torch")'

# -- conditions -----------------------------------------------------------------

KERNEL_VALUES = Condition(
    needs=_ROUTE,
    why=("the values are read at transformers' pure-torch delta rule, and with flash-linear-attention installed "
         "transformers calls fla's fused kernels instead"),
    holds=lambda model: kernels.torch_kernels_run(model.family),
)
TOKEN_ROUTE = Condition(
    needs=_ROUTE,
    why=("the chunked kernel a prompt runs by default never holds the state after each token; the route runs "
         "every call through the token-by-token recurrent kernel"),
    holds=lambda model: kernels.route(model.family) == "torch",
)

# -- the size of states ------------------------------------------------------------


def state_bytes_per_token(config: Any) -> int:
    """Bytes ``states`` holds per token per block: one float32 [heads, key_dim, value_dim] state.

    ``config`` is a text config (``linear_num_value_heads``, ``linear_key_head_dim``,
    ``linear_value_head_dim``) or a multimodal one carrying it.
    """
    names = ("linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    if isinstance(config, dict):
        config = config.get("text_config", config)
        heads, key_dim, value_dim = (config[name] for name in names)
    else:
        heads, key_dim, value_dim = (getattr(config, name) for name in names)
    return heads * key_dim * value_dim * 4


def human_bytes(size: int) -> str:
    """``2097152`` -> ``"2 MiB"``; exact multiples print without decimals."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            amount = size / scale
            return f"{amount:.0f} {unit}" if amount == int(amount) else f"{amount:.1f} {unit}"
    return f"{size} B"


def states_note(config: Any) -> str:
    """The support-table note of ``states`` for ``config``: its size per token per block."""
    return (f"materialized only when read: {human_bytes(state_bytes_per_token(config))} per token per block "
            f"(float32, linear_num_value_heads x linear_key_head_dim x linear_value_head_dim)")


def _text(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def conv_dims(config: Any) -> tuple[int, int]:
    """(conv_dim, conv_kernel) of the DeltaNet's convolution: q, k (key heads x key_dim each) and v (value heads x
    value_dim) channels, linear_conv_kernel_dim positions."""
    config = _text(config)
    conv_dim = (2 * config.linear_num_key_heads * config.linear_key_head_dim
                + config.linear_num_value_heads * config.linear_value_head_dim)
    return conv_dim, config.linear_conv_kernel_dim


def conv_state_note(model: Any) -> str:
    config = model.text_config
    conv_dim, kernel = conv_dims(config)
    return (f"{human_bytes(conv.conv_state_bytes(conv_dim, kernel, config))} per block in a decode cache "
            f"({conv_dim} channels: q, k, v; x {kernel} positions, {conv.dtype_name(config)})")


def cache_note(model: Any) -> str:
    """``states``' note: its size per token, and what a decode cache holds per block besides (the conv state)."""
    config = model.text_config
    conv_dim, kernel = conv_dims(config)
    return (f"{states_note(config)}; a decode cache holds one such state per block, plus the conv state, "
            f"{human_bytes(conv.conv_state_bytes(conv_dim, kernel, config))} per block")



# -- locators -------------------------------------------------------------------


def kernel_arg(element) -> Tap:
    return Tap(io="input", element=element, name=kernels.KERNEL, described=_KERNEL)


def kernel_out(element) -> Tap:
    return Tap(io="output", element=element, name=kernels.KERNEL, described=_KERNEL)


TOKEN_STATE = Tap(io="output", name=kernels.STATE,
                  described="the token-by-token kernel's step, once per token")
TOKEN_STATES = Tap(io="output", name=kernels.STATES,
                   described="the token-by-token kernel's loop, every token's state stacked, before it returns")

# -- hosts ------------------------------------------------------------------------

LinearAttentionBase = host("LinearAttentionBase", values=[
    Value("attention_output", Residual, "What the mixer adds to the residual stream", own("output")),
    Value("state", State,
          "The recurrent state after one token of the prompt; iterate it with tracer.iter; "
          "needs route_kernels(family, 'torch')",
          TOKEN_STATE, conditions=(TOKEN_ROUTE,)),
    Value("states", States,
          "The recurrent state after every token of this call; needs route_kernels(family, 'torch')",
          TOKEN_STATES, view=READ_ONLY, conditions=(TOKEN_ROUTE,), note=cache_note,
          no_grad="a stack of every token's state made for the reader; the forward computes with each token's "
                  "state (read state under tracer.iter for its gradient)",
          extra={"bytes_per_token": state_bytes_per_token, "note": states_note}),
], HOST="model.layers[i].linear_attn")

_K = (KERNEL_VALUES,)

#: one number per head (the mixers' decay rate A)
PerHead = layout("PerHead", "heads")
#: the forward computes g = -exp(A_log) · softplus(a + dt_bias): it holds exp(A_log), A is its negation (a copy)
NEGATED = View("negated, read-only", lambda host, x: -x, None, derived=True)

DeltaNet = host("DeltaNet", LinearAttentionBase, values=[
    *conv.conv_values("q, k, v", note=conv_state_note),
    Value("time_steps", Gates, "dt: softplus(a + dt_bias) in float32, per token and head; decays = time_steps · "
          "decay_rates", op("F_softplus_0")),
    Value("decay_rates", PerHead, "A: each head's decay rate, -exp(A_log) in float32 (negative), the log decay per "
          "unit of time step; read-only", op("exp_0"), view=NEGATED),
    Value("attention_queries", LinearQK, "The queries entering the delta rule", kernel_arg(0), conditions=_K),
    Value("attention_keys", LinearQK, "The keys entering the delta rule", kernel_arg(1), conditions=_K),
    Value("attention_values", LinearV, "The values entering the delta rule", kernel_arg(2), conditions=_K),
    Value("decays", Gates, "The per-token log decay of the recurrent state", kernel_arg("g"), conditions=_K),
    Value("betas", Gates, "The per-token write strength into the state", kernel_arg("beta"), conditions=_K),
    Value("state_input", MaybeState,
          "The recurrent state entering the layer, or None at the start of a prompt (a copy of the cache's buffer)",
          kernel_arg("initial_state"), conditions=_K,
          no_grad="None on a prompt; on a decode step a copy of the cache's buffer, and generate runs without "
                  "gradients"),
    Value("attention_head_outputs", LinearV,
          "The per-head outputs before the gated norm and the output projection", kernel_out(0), conditions=_K),
    Value("state_output", State, "The recurrent state leaving the layer", kernel_out(1), conditions=_K,
          reaches="the next call"),
], HOST="model.layers[i].linear_attn")

KERNELS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")

# -- a hybrid family's functions: linear_attn on linear_attention blocks, self_attn on full_attention ones

#: the standard paths every hybrid family resolves (block 0 is a DeltaNet block, so no mixer here)
HYBRID_PATHS = ["embed_tokens", "layers", "norm", "lm_head"]
MIXERS = {"linear_attention": "linear_attn", "full_attention": "self_attn"}


def layer_types(model: Any) -> list[str]:
    return list(model.text_config.layer_types)


def dim_sizes(model: Any) -> dict[str, int]:
    """The DeltaNet's dimensions, as its layouts name them."""
    config = model.text_config
    conv_dim, conv_kernel = conv_dims(config)
    return {
        "key_heads": config.linear_num_key_heads,
        "heads": config.linear_num_value_heads,
        "key_dim": config.linear_key_head_dim,
        "value_dim": config.linear_value_head_dim,
        "conv_dim": conv_dim,
        "conv_kernel": conv_kernel,
    }


def prepare(model: Any, modeling: Any) -> None:
    """Tap the delta-rule kernels of ``modeling`` and mark the model's DeltaNet blocks (`nncanon.core.kernels`)."""
    kernels.tap(modeling, KERNELS)
    for envoy in model._hosts:
        if isinstance(envoy, DeltaNet):
            kernels.track(envoy)
    conv.prepare(model, modeling, DeltaNet)


def explain_missing(model: Any, envoy: Any, name: str) -> str | None:
    """A block has linear_attn or self_attn, never both: say which this one has."""
    from ..blocks.decoder import Block

    if isinstance(envoy, Block) and name in MIXERS.values():
        types = layer_types(model)
        index = int(envoy.path.rsplit(".", 1)[-1])
        blocks = [i for i, t in enumerate(types) if MIXERS[t] == name]
        return (f"{envoy._std_path} is a {types[index]} block: it has {MIXERS[types[index]]}, not {name}; "
                f"the blocks with {name} are {blocks}")
    return None


__all__ = ["LinearAttentionBase", "DeltaNet", "KERNELS", "KERNEL_VALUES", "TOKEN_ROUTE", "state_bytes_per_token",
           "states_note", "HYBRID_PATHS", "MIXERS", "layer_types", "dim_sizes", "prepare", "explain_missing"]


# -- relations: what the DeltaNet's values mean (checked by the build on every block) -------------


def delta_rule(q, k, v, g, beta, state=None):
    """The gated delta rule, token by token in float64, as transformers' recurrent kernel defines it
    (queries and keys l2-normed, queries scaled by 1/sqrt(key_dim)): outputs, every token's state."""
    import torch

    q, k, v, g, beta = (t.detach().double() for t in (q, k, v, g, beta))
    rep = v.shape[2] // k.shape[2]
    q, k = (t.repeat_interleave(rep, dim=2) for t in (q, k))
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) / q.shape[-1] ** 0.5
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    batch, seq, heads, key_dim = k.shape
    state = torch.zeros(batch, heads, key_dim, v.shape[-1], dtype=torch.float64) if state is None else state.double()
    outputs, states = [], []
    for t in range(seq):
        state = state * g[:, t].exp()[..., None, None]
        read = torch.einsum("bhk,bhkv->bhv", k[:, t], state)
        state = state + torch.einsum("bhk,bhv->bhkv", k[:, t], beta[:, t, :, None] * (v[:, t] - read))
        outputs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], state))
        states.append(state)
    return torch.stack(outputs, 1), torch.stack(states, 1)


_KERNEL_TERMS = "attention_queries attention_keys attention_values decays betas state_input"


@relation("(attention_head_outputs, state_output) == gated delta rule(attention_queries, attention_keys, "
          "attention_values, decays, betas, from state_input)",
          proves=f"{_KERNEL_TERMS} attention_head_outputs state_output",
          reads=f"{_KERNEL_TERMS} attention_head_outputs state_output", tolerance=RECURRENCE)
def _kernel(host, r):
    outputs, states = delta_rule(*(r[name] for name in _KERNEL_TERMS.split()))
    return [(outputs, r["attention_head_outputs"]), (states[:, -1], r["state_output"])]


def _norm_and_out(module):
    """The gated norm and the output projection: ``norm`` and ``out_proj`` (Qwen), ``o_norm`` and ``o_proj``
    (OLMo Hybrid, whose ``o_norm`` is served as ``norm``)."""
    if hasattr(module, "out_proj"):
        return module.norm, module.out_proj
    return module.o_norm, module.o_proj


@relation("attention_output == out_proj(norm(attention_head_outputs, gate)) (OLMo Hybrid: o_proj, o_norm)",
          proves="attention_head_outputs", reads="attention_head_outputs norm.inputs attention_output",
          tolerance=SUBBLOCK)
def _out(host, r):
    module, heads = host._module, r["attention_head_outputs"]
    norm, out_proj = _norm_and_out(module)
    gate = r["norm.inputs"][0][1]
    normed = norm(heads.reshape(-1, heads.shape[-1]), gate)
    return [(out_proj(normed.reshape(*heads.shape[:2], -1)), r["attention_output"])]


@relation("state (its first visit) == the gated delta rule's state after the first token of (attention_queries, "
          "attention_keys, attention_values, decays, betas, from state_input)", proves="state",
          reads=f"{_KERNEL_TERMS} state", tolerance=RECURRENCE)
def _first_state(host, r):
    _, states = delta_rule(*(r[name][:, :1] if name != "state_input" else r[name]
                             for name in _KERNEL_TERMS.split()))
    return [(states[:, 0], r["state"])]


@relation("attention_head_outputs[:, 0] == state (its first visit) read by the first token's attention_queries "
          "(l2-normed, scaled by 1/sqrt(key_dim))", proves="attention_head_outputs",
          reads="attention_queries state attention_head_outputs", tolerance=RECURRENCE)
def _read_out(host, r):
    import torch

    q, state = r["attention_queries"][:, 0].double(), r["state"].double()
    q = q.repeat_interleave(state.shape[1] // q.shape[1], dim=1)
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) / q.shape[-1] ** 0.5
    return [(torch.einsum("bhk,bhkv->bhv", q, state), r["attention_head_outputs"][:, 0])]


@relation("states[:, -1] == state_output; state (its first visit) == states[:, 0]", proves="states state",
          reads="state states state_output")
def _states(host, r):
    return [(r["states"][:, -1], r["state_output"]), (r["state"], r["states"][:, 0])]


def _gate_input(module, x, name: str):
    """The decay's input a or the write strength's b (``name``) per token and head, by the mixer's own projection:
    in_proj_a / in_proj_b (Qwen3.5), a_proj / b_proj (OLMo Hybrid), or Qwen3-Next's in_proj_ba split per key head."""
    for projection in (f"in_proj_{name}", f"{name}_proj"):
        if hasattr(module, projection):
            return getattr(module, projection)(x)
    return module.fix_query_key_value_ordering(module.in_proj_qkvz(x), module.in_proj_ba(x))[{"b": 4, "a": 5}[name]]


@relation("time_steps == softplus(a + dt_bias) in float32, a = in_proj_a(input) (Qwen3-Next: in_proj_ba's a; "
          "OLMo Hybrid: a_proj(input)); "
          "decay_rates == -exp(A_log) in float32", proves="time_steps decay_rates",
          reads="inputs time_steps decay_rates")
def _rates(host, r):
    import torch

    module = host._module
    a = _gate_input(module, conv.masked_input(r["inputs"]), "a")
    return [(torch.nn.functional.softplus(a.float() + module.dt_bias), r["time_steps"]),
            (-module.A_log.float().exp(), r["decay_rates"])]


@relation("decays == time_steps · decay_rates", proves="decays", reads="time_steps decay_rates decays")
def _decays(host, r):
    return [(r["time_steps"] * r["decay_rates"], r["decays"])]


def _conv_input(host, inputs):
    """The conv's input [batch, conv_dim, seq] by the mixer's own projections of its masked input: Qwen3.5's
    in_proj_qkv, Qwen3-Next's in_proj_qkvz split per key head by its own fix_query_key_value_ordering, or OLMo
    Hybrid's q_proj, k_proj and v_proj side by side."""
    import torch

    module, x = host._module, conv.masked_input(inputs)
    if hasattr(module, "in_proj_qkv"):
        return module.in_proj_qkv(x).transpose(1, 2)
    if hasattr(module, "v_proj"):
        return torch.cat([module.q_proj(x), module.k_proj(x), module.v_proj(x)], dim=-1).transpose(1, 2)
    q, k, v, *_ = module.fix_query_key_value_ordering(module.in_proj_qkvz(x), module.in_proj_ba(x))
    return torch.cat([t.flatten(2) for t in (q, k, v)], dim=-1).transpose(1, 2)


@relation("betas == sigmoid(b), b = in_proj_b(input) (Qwen3-Next: in_proj_ba's b; OLMo Hybrid: b_proj(input), the "
          "sigmoid doubled where linear_allow_neg_eigval, so betas lie in (0, 2))", proves="betas",
          reads="inputs betas")
def _betas(host, r):
    module = host._module
    beta = _gate_input(module, conv.masked_input(r["inputs"]), "b").sigmoid()
    return [(beta * (2.0 if getattr(module, "allow_neg_eigval", False) else 1.0), r["betas"])]


def _conv_qkv(host, inputs, previous):
    """q, k, v per head as the mixer's conv gives them: act(conv1d([previous, the conv's input])) at this call's
    columns, split into q and k (key heads) and v (value heads)."""
    import torch

    module = host._module
    columns = _conv_input(host, inputs)
    whole = columns if previous is None else torch.cat([previous.to(columns), columns], dim=-1)
    convolved = conv._activation(module)(conv.conv_module(module)(whole)[..., :whole.shape[-1]])
    key, value = module.num_k_heads * module.head_k_dim, module.num_v_heads * module.head_v_dim
    q, k, v = torch.split(convolved[..., -columns.shape[-1]:].transpose(1, 2), [key, key, value], dim=-1)
    return (q.unflatten(-1, (module.num_k_heads, module.head_k_dim)),
            k.unflatten(-1, (module.num_k_heads, module.head_k_dim)),
            v.unflatten(-1, (module.num_v_heads, module.head_v_dim)))


@relation("attention_queries, attention_keys, attention_values == act(conv1d([conv_state_input, the conv's "
          "input])) at this call's columns, split into q (key heads), k (key heads) and v (value heads)",
          proves="attention_queries attention_keys attention_values",
          reads="inputs conv_state_input attention_queries attention_keys attention_values", tolerance=SUBBLOCK)
def _qkv(host, r):
    computed = _conv_qkv(host, r["inputs"], r["conv_state_input"])
    return list(zip(computed, (r["attention_queries"], r["attention_keys"], r["attention_values"])))


@relation("attention_output == out_proj(norm(gated delta rule(q, k, v of act(conv1d([conv_state_input, the conv's "
          "input])), time_steps · decay_rates, sigmoid(b)), gate)) on a call that starts a prompt (no state handed "
          "in), every value outside the kernel: what holds whichever kernel runs (transformers' or "
          "flash-linear-attention's)",
          proves="time_steps decay_rates attention_output",
          reads="inputs conv_state_input time_steps decay_rates norm.inputs attention_output", tolerance=RECURRENCE)
def _mixer(host, r):
    if r["conv_state_input"] is not None:  # a state handed in: its recurrent part is the kernel's (state_input)
        return []
    module, x = host._module, conv.masked_input(r["inputs"])
    q, k, v = _conv_qkv(host, r["inputs"], None)
    beta = _gate_input(module, x, "b").sigmoid() * (2.0 if getattr(module, "allow_neg_eigval", False) else 1.0)
    outputs, _ = delta_rule(q, k, v, r["time_steps"] * r["decay_rates"], beta)
    norm, out_proj = _norm_and_out(module)
    gate = r["norm.inputs"][0][1]
    heads = outputs.to(gate.dtype)
    normed = norm(heads.reshape(-1, heads.shape[-1]), gate)
    return [(out_proj(normed.reshape(*heads.shape[:2], -1)), r["attention_output"])]


DeltaNet.RELATIONS = (_kernel, _out, _states, _first_state, _read_out, _rates, _decays, _betas, _qkv, _mixer,
                      *conv.conv_relations(_conv_input, "in_proj_qkv(input) (Qwen3-Next: in_proj_qkvz's q, k, v; "
                                                              "OLMo Hybrid: [q_proj, k_proj, v_proj](input))"))
LinearAttentionBase.RELATIONS = ()
