"""Gated cross-attention blocks: a decoder block whose mixer attends from the text stream to states it did not make.

A cross-attention block (Llama 3.2 Vision's ``MllamaCrossAttentionDecoderLayer``, Flamingo's gated xattn)
sits in the text stack among the self-attention blocks. Its mixer (``cross_attn``) takes its queries from
the normed text stream and its keys and values from states handed to every such block (the projected
vision states: ``cross_attention_states``), under a mask that says which of those rows each text token
may see (``cross_attention_mask``); each residual add is scaled by ``tanh`` of a learned scalar gate, and
the MLP's add by a row mask too (a text token that sees no image row adds nothing of the MLP either).

Written once here, by the standard names, for every model that cross-attends:

- `CrossAttention` (``layers[i].cross_attn``): the attention values the self-attention serves, with the keys
  and values in the layouts of the states attended to (``vision_tokens`` rows, not the prompt's),
  ``cross_attention_states`` (what the keys and values are made of) and the relations that recompute them:
  q / k / v from the module's own projections and norms, the pattern from q and k under the mask, the
  heads' outputs, the output projection;
- `CrossBlock` (``layers[i]`` of a cross-attention block): the block's values, ``cross_attention_mask`` (the
  additive mask the block hands its mixer) and ``text_row_mask`` (1 on a text row that sees some state, 0 on
  one that sees none), and the gate relations: ``layer_mid == layer_input + tanh(attn_gate) ·
  cross_attn.attention_output``, ``layer_output == layer_mid + tanh(mlp_gate) · text_row_mask ·
  mlp.mlp_output``.

A family names its gates (`gated_block`: the parameter names on its block) and the condition under which the
blocks run (`runs`: a call with no states skips them, so no value of theirs exists). Its root takes `RunningStack`
and `RUNNING_STACK` beside the decoder's stack relation (which reads every block, so a call with no states skips it):
the stream passes from each block the call runs to the next one it runs, so on a call with no states the block
before a cross-attention block feeds the block after it.
"""

from __future__ import annotations

from typing import Any

import torch

from ...core.hosts import host
from ...core.layouts import HeadOutputs, Queries, Residual, layout
from ...core.locators import call, child, op, own
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Condition, Unavailable, Value, View
from ...core.views import READ_ONLY, heads
from ..attention.softmax import (
    ATTENTION_CALL,
    EAGER,
    HEAD_RESULTS_RELATION,
    LINK_RELATIONS,
    head_results_value,
)
from ..attention.softmax import ATTENTION_RELATIONS as _SELF
from ..blocks.decoder import BLOCK_RELATIONS

#: the states attended to: their rows are ``vision_tokens`` (every image's every tile's every row, padding tiles
#: included), not the prompt's tokens
CrossKeys = layout("CrossKeys", "batch num_kv_heads vision_tokens qk_head_dim")
CrossValues = layout("CrossValues", "batch num_kv_heads vision_tokens head_dim")
CrossPattern = layout("CrossPattern", "batch num_heads query vision_tokens")
CrossStates = layout("CrossStates", "batch vision_tokens hidden_size")
CrossMask = layout("CrossMask", "batch seq vision_tokens")
TextRowMask = layout("TextRowMask", "batch seq")


def runs(needs: str, why: str, holds: Any) -> Condition:
    """The condition every value of a cross-attention block carries: the load under which the blocks run."""
    return Condition(needs=needs, why=why, holds=holds)


# -- the mixer ---------------------------------------------------------------------------------------------------


def _split(module: Any, x: Any, count: int, batch: int) -> Any:
    """[batch, heads, rows, head_dim]; the states' rows of one batch entry one after another, however they come
    (Llama 3.2 Vision hands them over one row of states per image tile, and the module views them per entry)."""
    return x.reshape(batch, -1, count, module.head_dim).transpose(1, 2)


def _called(inputs: Any, name: str, position: int) -> Any:
    args, kwargs = inputs
    return kwargs[name] if name in kwargs else args[position]


@relation("attention_queries == q_norm(q_proj(input)) split into heads (from the text stream, no rotary); "
          "attention_keys == k_norm(k_proj(cross_attention_states)), attention_values == v_proj(cross_attention_states), "
          "split into kv heads", proves="attention_queries attention_keys attention_values",
          reads="inputs cross_attention_states attention_queries attention_keys attention_values")
def _qkv(host, r):
    module = host._module
    text, states = _called(r["inputs"], "hidden_states", 0), r["cross_attention_states"]
    batch = text.shape[0]
    queries = _split(module, module.q_proj(text), module.num_heads, batch)
    keys = _split(module, module.k_proj(states), module.num_key_value_heads, batch)
    values = _split(module, module.v_proj(states), module.num_key_value_heads, batch)
    norm = lambda name, x: getattr(module, name)(x) if getattr(module, name, None) is not None else x  # noqa: E731
    return [(norm("q_norm", queries), r["attention_queries"]), (norm("k_norm", keys), r["attention_keys"]),
            (values, r["attention_values"])]


def _mask(inputs: Any) -> Any:
    """The additive mask the mixer was called with (its block's cross_attention_mask), its head axis dropped."""
    return _called(inputs, "attention_mask", 3)[:, 0]


def cross_pattern(module: Any, queries: Any, keys: Any, mask: Any) -> tuple[Any, Any]:
    """Scores and probabilities ``[batch, heads, query, vision_tokens]`` in float64: q·kᵀ·scaling plus the additive
    ``mask`` ``[batch, query, vision_tokens]``, keys repeated over the query groups."""
    queries, keys = queries.double(), keys.double()
    keys = keys.repeat_interleave(queries.shape[1] // keys.shape[1], 1)
    scores = queries @ keys.transpose(-1, -2) * module.scaling + mask.double()[:, None]
    return scores, scores.softmax(-1)


@relation("attention_head_outputs == softmax(attention_queries · attention_keysᵀ · scaling + cross_attention_mask) · "
          "attention_values (no causal mask: every query may see every state row its mask allows)",
          proves="attention_head_outputs",
          reads="inputs attention_queries attention_keys attention_values attention_head_outputs",
          tolerance=SUBBLOCK)
def _attention(host, r):
    """A row of attention is a softmax over vision_tokens keys of head_dim products, then a sum over those
    keys: a chain well under SUBBLOCK's 800 roundings on the tiny model (80 keys: 2 images · 4 tiles · 10 rows, 6 wide)."""
    _, probabilities = cross_pattern(host._module, r["attention_queries"], r["attention_keys"], _mask(r["inputs"]))
    values = r["attention_values"].double()
    values = values.repeat_interleave(probabilities.shape[1] // values.shape[1], 1)
    return [((probabilities @ values).transpose(1, 2), r["attention_head_outputs"])]


@relation("attention_scores == attention_queries · attention_keysᵀ · scaling + cross_attention_mask; "
          "attention_probabilities == softmax(attention_scores)", proves="attention_scores attention_probabilities",
          reads="inputs attention_queries attention_keys attention_scores attention_probabilities",
          tolerance=SUBBLOCK)
def _pattern(host, r):
    mask = _mask(r["inputs"])
    scores, probabilities = cross_pattern(host._module, r["attention_queries"], r["attention_keys"], mask)
    # the mask holds the dtype's minimum, not -inf: compare the scores where a row is allowed
    allowed = (mask == 0)[:, None].expand_as(scores)
    return [(scores[allowed], r["attention_scores"].double()[allowed]),
            (probabilities, r["attention_probabilities"])]


_CALL = call("attention_interface_1")



def cross_attention_host(name: str, condition: Condition, block: str = "model.layers[i]", extra: tuple = (),
                         states: Any = None) -> type:
    """The cross-attention mixer's host (``{block}.cross_attn``); every value carries ``condition`` (the blocks run);
    ``extra``: the family's relations, at least one proving cross_attention_states (what hands them over);
    ``states``: their layout as handed over (`CrossStates`, [batch, vision_tokens, hidden], unless the family
    hands them over otherwise: Llama 3.2 Vision's come one row of states per image tile)."""
    when = (condition,)
    values = [
        Value("cross_attention_states", states or CrossStates,
              "The states the keys and values are made of (the projected vision states), as handed to the "
              "module; read-only", own("input", element="cross_attention_states"), view=READ_ONLY,
              conditions=when),
        Value("attention_queries", Queries, "The queries entering attention, from the text stream",
              op(_CALL, io="input", element=1), conditions=(condition, ATTENTION_CALL)),
        Value("attention_keys", CrossKeys, "The keys entering attention, from the states attended to",
              op(_CALL, io="input", element=2), conditions=(condition, ATTENTION_CALL)),
        Value("attention_values", CrossValues, "The values entering attention, from the states attended to",
              op(_CALL, io="input", element=3), conditions=(condition, ATTENTION_CALL)),
        Value("attention_scores", CrossPattern, "The attention scores entering the softmax, masked",
              op(_CALL, "nn_functional_softmax_0", io="input"), conditions=(condition, EAGER)),
        Value("attention_probabilities", CrossPattern, "The attention pattern over the states' rows",
              op(_CALL, "nn_functional_dropout_0"), conditions=(condition, EAGER)),
        Value("attention_head_outputs", HeadOutputs, "The per-head outputs before the output projection",
              op(_CALL, element=0), conditions=(condition, ATTENTION_CALL)),
        Value("attention_premix", HeadOutputs, "Every head's output side by side, as the output projection takes it",
              child("o_proj", "input"), view=heads(), conditions=when),
        Value("attention_output", Residual, "What the cross-attention hands its block, before the gate",
              own("output", element=0), conditions=when),
        _with(head_results_value(), when),
    ]
    return host(name, values=values, HOST=f"{block}.cross_attn", KIND="cross-attention",
                RELATIONS=(_qkv, _attention, _pattern, HEAD_RESULTS_RELATION, *LINK_RELATIONS, _SELF[-1], *extra))


def _with(value: Value, conditions: tuple) -> Value:
    import dataclasses

    return dataclasses.replace(value, conditions=(*conditions, *value.conditions))


# -- the block ---------------------------------------------------------------------------------------------------


def _row_mask_of(host: Any, x: Any) -> Any:
    return x[:, 0, :, 0]


def _mask_of(host: Any, x: Any) -> Any:
    return x[:, 0]


def gated_block(name: str, condition: Condition, attn_gate: str, mlp_gate: str, base: type, extra: tuple = ()) -> type:
    """A cross-attention block's host over ``base`` (the family's Block): its values carry ``condition``, and its
    relations are the gated adds, with ``attn_gate`` and ``mlp_gate`` the names of its scalar gate parameters;
    ``extra``: the family's own (how its mask is made from what the model was called with)."""

    @relation(f"layer_mid == layer_input + tanh({attn_gate}) · cross_attn.attention_output",
              proves="layer_mid cross_attn.attention_output", reads="layer_input cross_attn.attention_output layer_mid",
              adds=("layer_input", "cross_attn.attention_output", "layer_mid"))
    def gated_attention(host, r):
        gate = getattr(host._module, attn_gate).tanh()
        return [(r["layer_input"] + gate * r["cross_attn.attention_output"], r["layer_mid"])]

    @relation(f"layer_output == layer_mid + tanh({mlp_gate}) · text_row_mask · mlp.mlp_output",
              proves="layer_output mlp.mlp_output", reads="layer_mid mlp.mlp_output text_row_mask layer_output",
              adds=("layer_mid", "mlp.mlp_output", "layer_output"))
    def gated_mlp(host, r):
        gate = getattr(host._module, mlp_gate).tanh()
        rows = r["text_row_mask"][..., None]
        return [(r["layer_mid"] + gate * (rows * r["mlp.mlp_output"]), r["layer_output"])]

    @relation("text_row_mask == 1 on a text row whose cross_attention_mask allows some state row, else 0; "
              "cross_attention_mask is 0 (allowed) or the dtype's minimum, and 0 on every column of a row that sees "
              "none", proves="text_row_mask cross_attention_mask", reads="text_row_mask cross_attention_mask")
    def row_mask(host, r):
        mask, rows = r["cross_attention_mask"], r["text_row_mask"]
        minimum = torch.finfo(mask.dtype).min
        sees = (mask == 0) & (rows[..., None] == 1)
        values_ok = ((mask == 0) | (mask == minimum)).to(mask.dtype)
        expected_rows = sees.any(-1).to(rows.dtype)
        # a row that sees nothing was multiplied by 0: every column 0
        blank = (rows == 0)[..., None].expand_as(mask)
        return [(expected_rows, rows), (values_ok, torch.ones_like(mask)), (mask[blank], torch.zeros_like(mask[blank]))]

    when = (condition,)
    values = [_with(v, when) for v in base.values()] + [
        Value("cross_attention_mask", CrossMask,
              "The additive mask the block hands its cross-attention: 0 where a text token may see a state row, the "
              "dtype's minimum elsewhere (0 across a row that sees none); read-only",
              own("input", element="cross_attention_mask"), view=View("head axis dropped", _mask_of, None),
              conditions=when),
        Value("text_row_mask", TextRowMask,
              "1 on a text token that sees some state row, 0 on one that sees none (its MLP add is zeroed too); "
              "read-only", own("input", element="full_text_row_masked_out_mask"),
              view=View("head and column axes dropped", _row_mask_of, None), conditions=when),
    ]
    return host(name, base, values=values, MIXERS=("cross_attn",),
                RELATIONS=(gated_attention, gated_mlp, *BLOCK_RELATIONS[2:], row_mask, *extra))


# -- the stack ---------------------------------------------------------------------------------------------------


def _runs(block: Any) -> bool:
    """Whether this load runs ``block``: it serves the block's input (a cross-attention block's values carry the
    condition its blocks run under, `runs`)."""
    value = next(v for v in type(block).values() if v.name == "layer_input")
    try:
        block._require(value)
    except Unavailable:
        return False
    return True


class RunningStack:
    """A root whose text stack skips its cross-attention blocks on a call with no states to attend to."""

    @property
    def running_layers(self) -> list[Any]:
        """The blocks this call runs, in order: every block with states, the others alone without."""
        return [block for block in self.layers if _runs(block)]


@relation("layers[i].layer_output == layers[i+1].layer_input, on every block the call runs (a call with no states "
          "skips the cross-attention blocks: the block before one feeds the block after it)",
          proves="running_layers[*].layer_input", reads="running_layers[*].layer_output running_layers[*].layer_input")
def _running_stack(host, r):
    outs, ins = r["running_layers[*].layer_output"], r["running_layers[*].layer_input"]
    return [(first(out), entering) for out, entering in zip(outs[:-1], ins[1:])]


#: the stack relation of a root over cross-attention blocks (`RunningStack`), beside the decoder's
RUNNING_STACK = _running_stack

__all__ = ["CrossKeys", "CrossValues", "CrossPattern", "CrossStates", "CrossMask", "TextRowMask", "runs",
           "cross_pattern", "cross_attention_host", "gated_block", "RunningStack", "RUNNING_STACK"]
