"""Softmax attention over a causal mask (Llama's ``self_attn``): the values read at the attention call and
the relations that recompute the pattern from the queries and keys by the module's own scaling.

A family whose attention differs (a softcap, sinks, a latent KV, chunked windows) subclasses ``Attention``
and keeps the relations that still hold (``pick``), stating its own in place of the others.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import HeadOutputs, HeadResults, Keys, Pattern, Queries, Residual, Values
from ...core.locators import call, child, op, own
from ...core.precision import STEP, SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Condition, Value
from ...core.views import head_results, heads
from ...research.weights import ATTENTION as ATTENTION_WEIGHTS

EAGER = Condition(
    needs='attn_implementation="eager"',
    why="sdpa and flash compute the pattern inside one kernel, so no tensor holds it",
    holds=lambda model: model.attn_implementation == "eager",
)
ATTENTION_CALL = Condition(
    needs='attn_implementation "eager" or "sdpa"',
    why="the attention function's arguments and output are read in the layout eager and sdpa take",
    holds=lambda model: model.attn_implementation in ("eager", "sdpa"),
)

# -- attention ---------------------------------------------------------------------------------


def causal_mask(module: Any, padding: Any, queries: int, keys: int) -> Any:
    """[batch, 1, queries, keys] additive mask: causal (within the module's sliding window, if any)
    and no padded key."""
    q = torch.arange(keys - queries, keys)[:, None]
    k = torch.arange(keys)[None, :]
    allowed = k <= q
    window = getattr(module, "sliding_window", None)
    if window:
        allowed = allowed & (k > q - window)
    allowed = allowed[None, None] & padding[:, None, None, -keys:].bool()
    return torch.where(allowed, 0.0, float("-inf"))


def attending(host: Any) -> Any:
    """The attention module as the mask reads it. Its own ``sliding_window`` and ``scaling``, unless its host
    class says which window the forward hands the attention call (``WINDOW``, a function of the module:
    Mistral's passes ``config.sliding_window`` and has no attribute of its own) or which factor scales the
    scores (``SCALING``: GPT-J divides by ``scale_attn``, GPT-Neo does not scale)."""
    window = getattr(type(host), "WINDOW", None)
    scaling = getattr(type(host), "SCALING", None)
    module = host._module
    if window is None and scaling is None:
        return module
    from types import SimpleNamespace

    return SimpleNamespace(scaling=module.scaling if scaling is None else scaling(module),
                           sliding_window=getattr(module, "sliding_window", None) if window is None else window(module))


def pattern(module: Any, queries: Any, keys: Any, padding: Any, mask: Any = causal_mask) -> tuple[Any, Any]:
    """Scores and probabilities ``[batch, heads, query, key]`` by the attention's own scaling, in
    float64, keys repeated over the query groups; ``mask(module, padding, queries, keys)`` is the additive mask
    (the causal one; an encoder's masks only the padding)."""
    queries, keys = queries.double(), keys.double()
    keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    scores = queries @ keys.transpose(-1, -2) * module.scaling
    scores = scores + mask(module, padding, queries.shape[2], keys.shape[2]).double()
    return scores, scores.softmax(-1)


def mask_of(host: Any) -> Any:
    """The additive mask the host's attention applies: its class's ``MASK`` (an encoder's padding-only mask,
    `nncanon.parts.encoders.bidirectional`), else the causal one."""
    return getattr(type(host), "MASK", causal_mask)


def mix(probabilities: Any, values: Any) -> Any:
    """Head outputs ``[batch, seq, heads, head_dim]``: the probabilities over the (repeated) values."""
    values = values.double().repeat_interleave(probabilities.shape[1] // values.shape[1], 1)
    return (probabilities @ values).transpose(1, 2)


def real_queries(padding: Any, x: Any, seq_dim: int) -> Any:
    """``x`` at the query positions that are not padding (a padded row's output is whatever the kernel
    makes of a row with no key)."""
    keep = padding.bool()
    return x.movedim(seq_dim, 1)[keep]


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + causal mask) · "
          "attention_values", proves="attention_queries attention_keys attention_values attention_head_outputs",
          reads="model.attention_mask attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _attention(host, r):
    padding = r["model.attention_mask"]
    _, probabilities = pattern(attending(host), r["attention_queries"], r["attention_keys"], padding, mask_of(host))
    heads = mix(probabilities, r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + causal mask; "
          "attention_probabilities == softmax(attention_scores)",
          proves="attention_scores attention_probabilities",
          reads="model.attention_mask attention_queries attention_keys attention_scores attention_probabilities",
          tolerance=SUBBLOCK)
def _pattern(host, r):
    padding = r["model.attention_mask"]
    scores, probabilities = pattern(attending(host), r["attention_queries"], r["attention_keys"], padding,
                                    mask_of(host))
    read_scores = r["attention_scores"].double()
    # transformers masks with the dtype's minimum, not -inf: compare where a key is allowed
    allowed = torch.isfinite(scores)
    return [(scores[allowed], read_scores[allowed]),
            (real_queries(padding, probabilities, 2), real_queries(padding, r["attention_probabilities"], 2))]


@relation("attention_premix == attention_head_outputs, the heads side by side", proves="attention_premix",
          reads="attention_head_outputs attention_premix")
def _side_by_side(host, r):
    """The link from the attention function's output to the output projection's input: on softmax attention
    nothing stands between them but the reshape that puts the heads side by side. An attention that does
    something there (differential attention's subtraction and per-head norm, a head gate) fails here, and its
    family states what it does in its place. The same numbers moved, so exact."""
    heads, premix = r["attention_head_outputs"], r["attention_premix"]
    return [(heads.reshape(*heads.shape[:2], -1), premix.reshape(*premix.shape[:2], -1))]


@relation("attention_head_outputs == attention_probabilities · attention_values",
          proves="attention_head_outputs", reads="model.attention_mask attention_probabilities attention_values "
                                                   "attention_head_outputs", tolerance=SUBBLOCK)
def _mixed(host, r):
    """The pattern the values are mixed with is the one read (eager only): it joins the probabilities to the head
    outputs they make. A weighted sum over the prompt in float64 against float32's: SUBBLOCK."""
    padding = r["model.attention_mask"]
    heads = mix(r["attention_probabilities"].double(), r["attention_values"])
    return [(real_queries(padding, heads, 1), real_queries(padding, r["attention_head_outputs"], 1))]


@relation("attention_output == o_proj(attention_premix)", proves="attention_premix attention_output",
          reads="attention_premix attention_output")
def _output_projection(host, r):
    premix = r["attention_premix"]
    return [(host.o_proj._module(premix.reshape(*premix.shape[:2], -1)), r["attention_output"])]


@relation("attention_output == sum over heads of attention_head_results + the output projection's bias",
          proves="attention_head_results", reads="attention_head_results attention_output", tolerance=SUBBLOCK)
def _head_results(host, r):
    """The bias is the projection of zeros (none: zeros). A chain of heads·head_dim products and sums (<= 800)
    against the forward's one matmul over the same terms: SUBBLOCK."""
    projection = next(v for v in type(host).values() if v.name == "attention_head_results").extra["projection"]
    proj = host.get(projection)._module
    results = r["attention_head_results"]
    bias = proj.bias if proj.bias is not None else torch.zeros(results.shape[-1], dtype=results.dtype)
    return [(results.double().sum(-2) + bias.double(), r["attention_output"])]


def head_results_value(projection: str = "o_proj", count: Any = None, shown: str | None = None) -> Value:
    """``attention_head_results`` read where ``projection`` (the output projection) is called; ``count(host)`` the
    heads (default the text model's: `views.head_results`); ``shown``: how the page names the projection."""
    named = shown or projection
    return Value("attention_head_results", HeadResults,
                 f"Each head's contribution to attention_output: its slice of attention_premix through its own columns "
                 f"of {named} (TransformerLens's hook_result); summed over heads, plus {named}'s bias, "
                 f"attention_output; derived, read-only",
                 child(projection, "input", shown=shown), view=head_results(projection, count),
                 extra={"projection": projection})


#: the output projection's relation stays last: families keep it by ATTENTION_RELATIONS[-1]
ATTENTION_RELATIONS = (_attention, _pattern, _head_results, _mixed, _side_by_side, _output_projection)
#: the two that recompute the pattern under the host's mask (`mask_of`): an encoder restates their texts
PATTERN_RELATIONS = (_attention, _pattern)
HEAD_RESULTS_RELATION = _head_results
#: the links of the proof chain (generator/facts/chain.py) a family that picks its relations keeps: the read pattern
#: mixing the values, and the heads side by side into the output projection
SIDE_BY_SIDE_RELATION, MIXED_RELATION = _side_by_side, _mixed
LINK_RELATIONS = (_mixed, _side_by_side)

#: the call of the attention function, found by what it calls (`Call`): on 5.23 attention_interface_0 is the
#: get_interface(...) assignment, and a release that binds the name twice numbers the call _2
_CALL = call("attention_interface_1")

#: softmax attention's values; `Attention` adds the per-head results, which the Qwen vision tower (heads of its
#: own, not the text model's) does not serve
AttentionBase = host("AttentionBase", values=[
    Value("attention_queries", Queries, "The queries entering attention",
          op(_CALL, io="input", element=1), conditions=(ATTENTION_CALL,)),
    Value("attention_keys", Keys, "The keys entering attention", op(_CALL, io="input", element=2),
          conditions=(ATTENTION_CALL,)),
    Value("attention_values", Values, "The values entering attention", op(_CALL, io="input", element=3),
          conditions=(ATTENTION_CALL,)),
    Value("attention_scores", Pattern, "The attention scores entering the softmax, masked",
          op(_CALL, "nn_functional_softmax_0", io="input"), conditions=(EAGER,)),
    Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
          child("o_proj", "input"), view=heads()),
    Value("attention_output", Residual, "What the attention adds to the residual stream", own("output", element=0)),
    Value("attention_probabilities", Pattern, "The attention pattern the values are mixed with",
          op(_CALL, "nn_functional_dropout_0"), conditions=(EAGER,)),
    Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
          op(_CALL, element=0), conditions=(ATTENTION_CALL,)),
], HOST="model.layers[i].self_attn", KIND="attention", RELATIONS=ATTENTION_RELATIONS)
#: the weights (W_Q ... b_O) are plain attributes: views of the parameters, outside any trace (nncanon.weights)
Attention = host("Attention", AttentionBase, values=[head_results_value()], **ATTENTION_WEIGHTS)



def _gated(r, x, gate):
    """attention_head_outputs side by side times sigmoid(gate), in float64, against the read attention_premix."""
    heads, premix = r["attention_head_outputs"], r["attention_premix"]
    gated = heads.double().reshape(*x.shape[:-1], -1) * torch.sigmoid(gate.double().reshape(*x.shape[:-1], -1))
    return [(gated, premix.reshape(*premix.shape[:2], -1))]


@relation("attention_premix == attention_head_outputs, the heads side by side, · sigmoid(gate), gate = the second half "
          "of each head's q_proj(input)", proves="attention_premix", reads="input attention_head_outputs attention_premix",
          tolerance=STEP, exact=False)
def _output_gated(host, r):
    """Qwen3-Next's and Qwen3.5's attention gates its heads' outputs before o_proj: q_proj gives each head its query and
    a gate side by side, and the heads' outputs are scaled by the gate's sigmoid. The projection by the module, the
    sigmoid and the product in float64 against the forward's float32: one step, and no error is exactly 0 on
    every CPU."""
    x = first(r["input"])
    head_dim = host._module.head_dim
    return _gated(r, x, host.q_proj._module(x).view(*x.shape[:-1], -1, head_dim * 2).chunk(2, dim=-1)[1])


@relation("attention_premix == attention_head_outputs, the heads side by side, · sigmoid(gate_proj(input))",
          proves="attention_premix", reads="input attention_head_outputs attention_premix", tolerance=STEP, exact=False)
def _projection_gated(host, r):
    """AFMoE's attention gates its heads' outputs by a projection of its own (gate_proj, one gate per head dimension,
    no bias) of the attention's input; the same float64 error model as Qwen3-Next's gate."""
    x = first(r["input"])
    return _gated(r, x, host._module.gate_proj(x))


#: softmax attention whose heads are gated between the attention call and o_proj (Qwen3-Next, Qwen3.5): the link
#: into the output projection is the gate, not the plain side by side
OutputGatedAttention = host("OutputGatedAttention", Attention, RELATIONS=tuple(
    _output_gated if relation is _side_by_side else relation for relation in ATTENTION_RELATIONS))

#: softmax attention whose heads are gated by a projection of their own (AFMoE's gate_proj) before o_proj
PROJECTION_GATED_RELATIONS = tuple(_projection_gated if relation is _side_by_side else relation
                                   for relation in ATTENTION_RELATIONS)
