"""Weights in standard names: TransformerLens's ``W_Q``, ``W_O``, ``W_in``, ``W_E``, ... as views of the model's parameters.

    model.layers[0].self_attn.W_Q          # [heads d_model head_dim], a view of q_proj.weight
    with torch.no_grad():
        model.layers[0].self_attn.W_V[3] = 0   # lands in the model's v_proj weight
    model.layers[0].self_attn.W_O = new        # copied into the model's o_proj weight

Each weight is a plain attribute of its host (no trace needed): a view of the parameter (``Tensor.view``,
``.T``, ``narrow``, ``select``, never a copy), so an in-place edit under ``torch.no_grad()`` lands in the model
and an assignment is copied in. A bias the projection does not have is None.

Where a family's projections are fused (GPT-2's Conv1D ``c_attn``, BLOOM's and GPT-NeoX's per-head interleaved
``query_key_value``, Phi-3's ``qkv_proj``, GPTBigCode's multi-query ``c_attn``, Qwen3-Next's query-and-gate
``q_proj``), the family's host class states its layout in ``WEIGHTS`` (a `Layout`); the others are found by the
projection names the shared hosts already use. Heads no stride walks in order (CodeGen's mp_num chunks, Falcon-40B's
groups) are served gathered, their edits written back (nncanon.research.gathered). A mechanism with no such matrix (latent
attention) states why in ``WEIGHTS.unmapped``, a block without its own (Gemma 4's KV-shared) in ``WEIGHTS.choose``:
the read is one error naming the weight and the family, never a wrong view.

Every weight is proven by a relation on every block (`relations`): the values the forward reads at the attention
call, or the projection's output where the forward reads its queries after a norm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.values import NotOnHost
from .gathered import grouped
from .norm_forms import WeightUnavailable, gain_form, norm_epsilon, norm_kind  # noqa: F401 (re-exported)
from .norm_weights import NORM_STEMS, NORMS, ComputedGain, Gain, gains, norm_module  # noqa: F401 (named here too)
from .weight import Weight, WeightTypeError  # noqa: F401 (re-exported)

# -- where a weight lives --------------------------------------------------------------------------------------


def in_out(module: Any) -> torch.Tensor:
    """A projection's weight as ``[in, out]``: a Linear's ``.T``, a Conv1D's own (stored transposed already)."""
    return module.weight.T if isinstance(module, torch.nn.Linear) else module.weight


def head_width(host: Any, kind: str) -> int:
    """The width of one head of ``kind`` ("q", "k", "v"): the module's ``head_dim`` (or ``head_size``), else the
    model's (queries and keys at qk_head_dim)."""
    module = host._module
    width = getattr(module, "head_dim", None) or getattr(module, "head_size", None)
    if width:
        return int(width)
    model = host._std_model
    return model.qk_head_dim if kind in ("q", "k") else model.head_dim


#: (host, tensor whose last axis is the projection's outputs) -> [..., count, head_dim]: one head's columns
Pick = Callable[[Any, torch.Tensor], torch.Tensor]


def heads_of(kind: str) -> Pick:
    """Every output of the projection, one head after another."""
    return lambda host, t: t.unflatten(-1, (-1, head_width(host, kind)))


def narrowed(kind: str, start: Callable[[Any], int], count: Callable[[Any], int]) -> Pick:
    """``count(host)`` heads from output ``start(host)`` of a fused projection laid out q | k | v."""
    def pick(host, t):
        width = head_width(host, kind)
        return t.narrow(-1, start(host) * width, count(host) * width).unflatten(-1, (-1, width))
    return pick


def interleaved(slot: int, slots: int = 3, kind: str = "q") -> Pick:
    """Slot ``slot`` of each head's ``[slots, head_dim]`` group: BLOOM's and GPT-NeoX's per-head q, k, v; Qwen3-Next's
    per-head query and gate."""
    return lambda host, t: t.unflatten(-1, (-1, slots, head_width(host, kind))).select(-2, slot)


@dataclass(frozen=True)
class Projection:
    """A weight's source: the child (its standard or native name) and its outputs' columns (None: all of them)."""

    module: str
    pick: Pick | None = None
    #: the picked columns are heads (``[..., count, head_dim]``) rather than one MLP's neurons
    heads: bool = True
    #: the pick gives the heads as two axes ``[..., groups, per_group, head_dim]`` that no one stride walks in order
    #: (CodeGen's mp_num chunks, Falcon-40B's key/value groups): served gathered (nncanon.research.gathered), edits written back
    grouped: bool = False


@dataclass(frozen=True)
class Layout:
    """How a host's parameters hold its weights. Unset fields are found by the shared names."""

    q: Projection | None = None
    k: Projection | None = None
    v: Projection | None = None
    o: str | None = None
    w_in: Projection | None = None
    w_gate: Projection | None = None
    w_out: str | None = None
    #: why this host has no query, key and value matrices (its mechanism), or None; W_O stays
    unmapped: str | None = None
    #: the module attribute the forward multiplies the projected queries by before the attention call (OPT's scaling)
    query_scale: str | None = None
    #: the forward repeats each key/value head for its group's query heads before the attention (Falcon-40B): the
    #: keys and values read there have num_heads heads, W_K and W_V the parameter's num_kv_heads
    broadcast_kv: bool = False
    #: (host, kind "q"/"k"/"v", weight name) -> this host's own source (a Projection), the one-line reason it has
    #: none (a str), or None for the layout's: where blocks of one host class differ (Gemma 4's KV-shared blocks)
    choose: Callable[[Any, str, str], Projection | str | None] | None = None
    extra: dict = field(default_factory=dict, compare=False)


DEFAULT = Layout()

_SEPARATE = {"q": "q_proj", "k": "k_proj", "v": "v_proj"}
_OUTPUTS = ("o_proj", "out_proj", "dense", "c_proj")
_UPS = ("up_proj", "c_fc", "fc1", "dense_h_to_4h", "fc_in", "linear_fc1", "wi")


def _has(host: Any, name: str) -> bool:
    try:
        child = getattr(host, name)
    except Exception:  # a standard name the host explains it lacks
        return False
    return isinstance(getattr(child, "_module", None), torch.nn.Module)


def _layout(host: Any) -> Layout:
    return getattr(type(host), "WEIGHTS", DEFAULT)


def _unmapped(host: Any, name: str) -> None:
    why = _layout(host).unmapped
    if why:
        raise WeightUnavailable(f"{host._standard_path()}.{name} is unavailable on {host._std_model.family}: {why}")


def _query_and_gate(host: Any) -> bool:
    """Qwen3-Next's and Qwen3.5's q_proj: each head's query and its output gate side by side, twice as wide."""
    q = getattr(host._module, "q_proj", None)
    return isinstance(q, torch.nn.Linear) and q.out_features == 2 * host._std_model.num_heads * head_width(host, "q")


def projection(host: Any, kind: str) -> Projection:
    """The source of W_Q/W_K/W_V (kind q, k, v) or W_in/W_gate (kind in, gate) on ``host``."""
    layout = _layout(host)
    given = getattr(layout, {"in": "w_in", "gate": "w_gate"}.get(kind, kind))
    if given is not None:
        return given
    if kind == "q" and _query_and_gate(host):
        return Projection("q_proj", interleaved(0, 2, "q"))
    if kind in _SEPARATE:
        return Projection(_SEPARATE[kind], heads_of(kind))
    names = ("gate_proj",) if kind == "gate" else _UPS
    found = next((name for name in names if _has(host, name)), None)
    if found is None:
        what = "gate" if kind == "gate" else "up projection"
        raise WeightUnavailable(f"{host._standard_path()}.W_{kind} is unavailable on {host._std_model.family}: its "
                                f"MLP ({type(host._module).__name__}) has no {what} nncanon knows"
                                + (" (the MLP is not gated: W_in is its only input weight)" if kind == "gate" else ""))
    return Projection(found)


def output_projection(host: Any, kind: str) -> str:
    """The name of W_O's (kind o) or W_out's (kind out) projection on ``host``."""
    layout = _layout(host)
    given = layout.o if kind == "o" else layout.w_out
    if given is not None:
        return given
    if kind == "out":
        return "down_proj"  # every MLP host mounts its down projection as down_proj (RENAME)
    value = next((v for v in type(host).values() if v.name == "attention_head_results"), None)
    if value is not None:
        return value.extra["projection"]
    return next(name for name in _OUTPUTS if _has(host, name))


def module(host: Any, name: str) -> torch.nn.Module:
    return getattr(host, name)._module


# -- the weights -----------------------------------------------------------------------------------------------


def _source(host: Any, kind: str, name: str) -> Projection:
    """``projection``, after the layout's refusals: ``unmapped`` for the class, ``choose`` for this host."""
    _unmapped(host, name)
    choose = _layout(host).choose
    chosen = choose(host, kind, name) if choose is not None else None
    if isinstance(chosen, str):
        raise WeightUnavailable(f"{host._standard_path()}.{name} is unavailable on {host._std_model.family}: {chosen}")
    return chosen or projection(host, kind)


def _input_weight(host: Any, kind: str, name: str) -> torch.Tensor:
    source = _source(host, kind, name)
    weight = in_out(module(host, source.module))  # [in, out]
    if source.pick is None:
        return weight  # an MLP's [d_model, d_mlp]
    picked = source.pick(host, weight)
    if source.grouped:  # [in, groups, per_group, head_dim] -> [groups · per_group, in, head_dim]
        return grouped(picked.movedim(0, -2))
    return picked.movedim(-2, 0) if source.heads else picked  # [count, in, head_dim] or [in, d_mlp]


def _input_bias(host: Any, kind: str, name: str) -> torch.Tensor | None:
    source = _source(host, kind, name)
    bias = module(host, source.module).bias
    if bias is None:
        return None
    if source.pick is None:
        return bias
    return grouped(source.pick(host, bias)) if source.grouped else source.pick(host, bias)


def _output_weight(host: Any, kind: str, name: str) -> torch.Tensor:
    weight = in_out(module(host, output_projection(host, kind)))  # [heads*head_dim or d_mlp, d_model]
    return weight.unflatten(0, (host._std_model.num_heads, -1)) if kind == "o" else weight


def _output_bias(host: Any, kind: str, name: str) -> torch.Tensor | None:
    return module(host, output_projection(host, kind)).bias


def _w(name: str, dims: str, description: str, read: Callable[[Any], Any]) -> Weight:
    return Weight(name, dims, description, read)


ATTENTION = {w.name: w for w in [
    _w("W_Q", "num_heads hidden_size qk_head_dim", "Each head's query weight: queries = input @ W_Q + b_Q",
       lambda h: _input_weight(h, "q", "W_Q")),
    _w("W_K", "num_kv_heads hidden_size qk_head_dim", "Each key head's weight: keys = input @ W_K + b_K",
       lambda h: _input_weight(h, "k", "W_K")),
    _w("W_V", "num_kv_heads hidden_size head_dim", "Each value head's weight: values = input @ W_V + b_V",
       lambda h: _input_weight(h, "v", "W_V")),
    _w("b_Q", "num_heads qk_head_dim", "The query bias per head, None without one", lambda h: _input_bias(h, "q", "b_Q")),
    _w("b_K", "num_kv_heads qk_head_dim", "The key bias per head, None without one", lambda h: _input_bias(h, "k", "b_K")),
    _w("b_V", "num_kv_heads head_dim", "The value bias per head, None without one", lambda h: _input_bias(h, "v", "b_V")),
    _w("W_O", "num_heads head_dim hidden_size",
       "Each head's rows of the output projection: attention_output = Σ_h premix[h] @ W_O[h] + b_O",
       lambda h: _output_weight(h, "o", "W_O")),
    _w("b_O", "hidden_size", "The output projection's bias, None without one", lambda h: _output_bias(h, "o", "b_O")),
]}

MLP = {w.name: w for w in [
    _w("W_in", "hidden_size intermediate_size", "The up projection: the (gated) neurons' input = input @ W_in + b_in",
       lambda h: _input_weight(h, "in", "W_in")),
    _w("b_in", "intermediate_size", "The up projection's bias, None without one", lambda h: _input_bias(h, "in", "b_in")),
    _w("W_gate", "hidden_size intermediate_size", "The gate projection: mlp_activation = act(input @ W_gate + b_gate)",
       lambda h: _input_weight(h, "gate", "W_gate")),
    _w("b_gate", "intermediate_size", "The gate projection's bias, None without one",
       lambda h: _input_bias(h, "gate", "b_gate")),
    _w("W_out", "intermediate_size hidden_size", "The down projection: mlp_output = mlp_neurons @ W_out + b_out",
       lambda h: _output_weight(h, "out", "W_out")),
    _w("b_out", "hidden_size", "The down projection's bias, None without one", lambda h: _output_bias(h, "out", "b_out")),
]}


def _experts(host: Any, part: str, name: str) -> torch.Tensor:
    """A mixture's per-expert weights from its fused ``experts``: ``gate_up_proj [experts, 2·intermediate, hidden]``
    (the gate half first, as the forward chunks it) and ``down_proj [experts, hidden, intermediate]``; or, where the
    experts say ``is_transposed`` (Aria's, stored [in, out] for grouped_mm), ``gate_up_proj [experts, hidden,
    2·intermediate]`` (the gate half first in the last dimension) and ``down_proj [experts, intermediate, hidden]``."""
    experts = host.experts._module
    fused, down = experts.gate_up_proj, experts.down_proj
    hidden = host._std_model.hidden_size
    if getattr(experts, "is_transposed", False) and getattr(experts, "alpha", None) is None:
        if part == "out":
            return down  # [experts, intermediate, hidden]
        gate, up = fused.chunk(2, dim=-1)
        return gate if part == "gate" else up  # [experts, hidden, intermediate]
    if fused.shape[1] == hidden and fused.shape[2] != hidden or getattr(experts, "alpha", None) is not None:
        raise WeightUnavailable(f"{host._standard_path()}.{name} is unavailable on {host._std_model.family}: its experts "
                                f"({type(experts).__name__}) store gate_up_proj as [experts, hidden, 2·intermediate] "
                                f"with their own activation, a layout nncanon does not map; read mlp.experts' "
                                f"gate_up_proj and down_proj")
    if part == "out":
        return down.transpose(1, 2)  # [experts, intermediate, hidden]
    gate, up = fused.chunk(2, dim=1)
    return (gate if part == "gate" else up).transpose(1, 2)  # [experts, hidden, intermediate]


EXPERTS = {w.name: w for w in [
    _w("W_in", "num_experts hidden_size intermediate_size",
       "Each expert's up projection (the half of experts.gate_up_proj after the gate)",
       lambda h: _experts(h, "in", "W_in")),
    _w("W_gate", "num_experts hidden_size intermediate_size",
       "Each expert's gate projection (the first half of experts.gate_up_proj)", lambda h: _experts(h, "gate", "W_gate")),
    _w("W_out", "num_experts intermediate_size hidden_size", "Each expert's down projection (experts.down_proj)",
       lambda h: _experts(h, "out", "W_out")),
    _w("b_in", "", "None: the fused experts have no bias", lambda h: None),
    _w("b_gate", "", "None: the fused experts have no bias", lambda h: None),
    _w("b_out", "", "None: the fused experts have no bias", lambda h: None),
]}


def _root(model: Any, name: str, attr: str) -> Any:
    child = getattr(model, name)._module
    return getattr(child, attr)


def _token_embedding(model: Any) -> Any:
    """``embed_tokens.weight``; on an encoder-decoder, whose stacks embed (T5's, BART's both from one shared matrix;
    Whisper's decoder alone, its encoder reading audio), the model's own input embedding."""
    try:
        return _root(model, "embed_tokens", "weight")
    except NotOnHost:
        try:
            model.encoder, model.decoder  # noqa: B018 (a model of two stacks, or the first refusal stands)
        except NotOnHost:
            pass
        else:
            return model._module.get_input_embeddings().weight
        raise


ROOT = {w.name: w for w in [
    _w("W_E", "vocab_size hidden_size", "The token embedding matrix (embed_tokens.weight; an encoder-decoder's input "
       "embedding, T5's shared); a family that scales the embedding (Gemma's √hidden_size) scales token_embeddings, "
       "not W_E", _token_embedding),
    _w("W_U", "hidden_size vocab_size", "The unembedding: lm_head_output = final_norm_output @ W_U + b_U",
       lambda m: _root(m, "lm_head", "weight").T),
    _w("b_U", "vocab_size", "The head's bias, None without one", lambda m: _root(m, "lm_head", "bias")),
]}

_ALL = {**ATTENTION, **MLP, **ROOT, **NORMS}


# -- the layouts families name ----------------------------------------------------------------------------------

def _heads(h: Any) -> int:
    return h._std_model.num_heads


def _kv_heads(h: Any) -> int:
    module = h._module  # GPTBigCode's multi-query attention says kv_heads (1), its config does not
    return getattr(module, "kv_heads", None) or getattr(module, "num_key_value_heads", None) or h._std_model.num_kv_heads


#: one projection whose outputs are every query head, then every key head, then every value head (GPT-2's c_attn,
#: Phi-3's qkv_proj, GPTBigCode's multi-query c_attn)
def stacked_qkv(module: str, **layout: Any) -> Layout:
    return Layout(q=Projection(module, narrowed("q", lambda h: 0, _heads)),
                  k=Projection(module, narrowed("k", _heads, _kv_heads)),
                  v=Projection(module, narrowed("v", lambda h: _heads(h) + _kv_heads(h), _kv_heads)), **layout)


#: one projection whose outputs are, head after head, that head's query, key and value (BLOOM, GPT-NeoX)
def interleaved_qkv(module: str, **layout: Any) -> Layout:
    return Layout(q=Projection(module, interleaved(0)), k=Projection(module, interleaved(1)),
                  v=Projection(module, interleaved(2)), **layout)


def names(host_class: type) -> list[str]:
    """The weights a host class carries, in declaration order."""
    values = {v.name for v in host_class.values()} if hasattr(host_class, "values") else set()
    return [name for name in _ALL if isinstance(getattr(host_class, name, None), Weight)
            and (not isinstance(_ALL[name], Gain) or f"{_ALL[name].stem}_output" in values)]

