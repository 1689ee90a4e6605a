"""The attention whose forward computes the pattern in a method of its own, ``self._attn(query, key, value,
mask)``, as GPT-J, GPT-Neo and CodeGen do (transformers ships them with eager attention and flash only: no
attention interface, no sdpa).

Queries, keys and values are ``_attn``'s arguments, ``[batch, heads, seq, head_dim]``, after the rotary (if
any) and with the cache's keys before the call's; the scores are the softmax's input inside ``_attn``, the
probabilities the attention dropout's output, and the head outputs ``_attn``'s first result, which holds the
heads before the sequence (``[batch, heads, seq, head_dim]``): the value shows it as ``[batch, seq, heads,
head_dim]``, a view, so an edit lands. The scaling is the family's: ``SCALING`` of the host class, a function
of the module (GPT-J divides by ``scale_attn`` = √head_dim, GPT-Neo does not scale).
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.locators import op
from ...core.values import Value, View
from .softmax import EAGER, Attention

#: [batch, heads, seq, head_dim] as [batch, seq, heads, head_dim]: a transpose is a view, so in-place edits land
HEADS_FIRST = View("heads-first", lambda host, x: x.transpose(1, 2), lambda host, x, current: x.transpose(1, 2))

#: keys that arrive transposed, [batch, heads, head_dim, seq] (GPT-1's split_heads(k=True), MPT's kᵀ in its matmul),
#: shown [batch, heads, seq, head_dim]: a transpose is a view, so in-place edits land
KEYS_TRANSPOSED = View("keys transposed", lambda host, x: x.transpose(-1, -2),
                       lambda host, x, current: x.transpose(-1, -2))

_ATTN = "self__attn_0"


#: where each of the attention's values is read in such a forward (the rest as Attention reads them)
_LOCATED = {
    "attention_queries": (op(_ATTN, io="input", element=0), None),
    "attention_keys": (op(_ATTN, io="input", element=1), None),
    "attention_values": (op(_ATTN, io="input", element=2), None),
    "attention_scores": (op(_ATTN, "nn_functional_softmax_0", io="input"), None),
    "attention_probabilities": (op(_ATTN, "self_attn_dropout_0"), None),
    "attention_head_outputs": (op(_ATTN, element=0), HEADS_FIRST),
}


def method_attention(scaling, softmax: str = "nn_functional_softmax_0", **attrs):
    """The attention host over ``_attn``; ``scaling(module)`` is the factor the scores are multiplied by, ``softmax``
    the op whose input is the scores (CodeGen builds ``nn.Softmax(dim=-1)`` and calls it: the call is ``call_0``).
    Every value read inside ``_attn`` needs eager attention (flash does not call it)."""
    located = {**_LOCATED, "attention_scores": (op(_ATTN, softmax, io="input"), None)}
    values = [Value(v.name, v.layout, v.description, located[v.name][0], view=located[v.name][1] or v.view,
                    conditions=(EAGER,)) for v in Attention.values() if v.name in located]
    return host("MethodAttention", Attention, values=values, SCALING=staticmethod(scaling), **attrs)


def release_attention(name: str, native: type, scaling, relations: tuple, softmax: str = "nn_functional_softmax_0",
                      **attrs) -> type:
    """The attention host of a family whose transformers release decides where its pattern is computed: in
    ``_attn`` (:func:`method_attention`) where the release's ``native`` class has one, else through the shared
    attention interface (from 5.24 GPT-J's and CodeGen's, scaled by the module's own ``scaling``), where the values
    are read where Llama's are. The relations are the same either way."""
    if hasattr(native, "_attn"):
        return method_attention(scaling, softmax=softmax, RELATIONS=relations, **attrs)
    return host(name, Attention, RELATIONS=relations, **attrs)
