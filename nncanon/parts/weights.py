"""The relations that prove the weights (`nncanon.weights`): every view against what the forward computed with it.

They are built per host (`relations`), because what the forward exposes differs by module: queries read at the
attention call are rotated, and at position 0 rotary turns nothing, so there they are the projection itself; a
family that norms its queries and keys (q_norm) is proven at the projection's output instead, and the relation's
text says so. Values are never rotated: they are proven on every position. A family's own scale between the
projection and the attention call (Falcon-H1's key_multiplier, OLMo's clip) is read from the module and named in
the text.

Tolerance: one projection is hidden_size (or intermediate_size) products and sums, recomputed as an einsum in
another order than the forward's matmul (<= 800 roundings of float32): SUBBLOCK, as attention_head_results.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.precision import STEP, STEP_ROUNDINGS, SUBBLOCK
from ..core.relations import Relation, first, rows
from ..research.weights import (  # noqa: F401
    ATTENTION,
    EXPERTS,
    MLP,
    ROOT,
    _layout,
    gain_form,
    gains,
    norm_epsilon,
    norm_kind,
    norm_module,
    projection,
)

_QK_NORMS = ("q_norm", "q_layernorm", "query_layernorm")
_K_NORMS = ("k_norm", "k_layernorm", "key_layernorm")


def _has_qk_norm(host: Any) -> bool:
    return any(getattr(host._module, name, None) is not None for name in _QK_NORMS)


def _project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``[..., d] @ [count, d, head_dim] -> [..., count, head_dim]`` in float64, plus the bias."""
    out = torch.einsum("...d,cdh->...ch", x.double(), weight.double())
    return out if bias is None else out + bias.double()


def _clip(host: Any, x: torch.Tensor) -> torch.Tensor:
    clip = getattr(getattr(host._module, "config", None), "clip_qkv", None)
    return x if clip is None else x.clamp(-clip, clip)


def _clip_text(host: Any) -> str:
    clip = getattr(getattr(host._module, "config", None), "clip_qkv", None)
    return "" if clip is None else ", clipped to ±clip_qkv"


def _key_scale(host: Any) -> float | None:
    return getattr(host._module, "key_multiplier", None)


def _act(host: Any) -> Any:
    """The MLP's activation, by whichever name its module gives it."""
    module = host._module
    return next(getattr(module, name) for name in ("act_fn", "act", "activation_fn", "gelu_impl")
                if getattr(module, name, None) is not None)


def _normed(host: Any, which: str, x: torch.Tensor) -> torch.Tensor:
    """The module's q_norm/k_norm of projected heads ``[..., count, head_dim]``: per head when its gain is one head
    wide (Qwen3, Gemma 3), over the whole projection when it is count · head_dim wide (OLMo-2, OLMoE)."""
    names = _QK_NORMS if which == "q" else _K_NORMS  # Hunyuan's query_layernorm and key_layernorm too
    norm = next(getattr(host._module, name) for name in names if getattr(host._module, name, None) is not None)
    if getattr(norm, "weight", None) is None and isinstance(getattr(norm, "norms", None), torch.nn.ModuleList):
        # a LayerNorm of its own per head (Stable LM 2 12B's StableLmLayerNormPerHead): head i by norms[i]
        return torch.stack([head_norm(x[..., i, :].to(head_norm.weight.dtype))
                            for i, head_norm in enumerate(norm.norms)], dim=-2)
    if getattr(norm, "weight", None) is None:  # a weightless norm (NanoChat's), called on the heads: per head
        return norm(x)
    x = x.to(norm.weight.dtype)
    if norm.weight.numel() == x.shape[-1]:
        return norm(x)
    return norm(x.flatten(-2)).unflatten(-1, x.shape[-2:])


def _rotary_at_zero(host: Any, inputs: Any, keep: torch.Tensor) -> torch.Tensor | None:
    """What rotary multiplies position 0 by: the cos the attention is called with there (``[rows, 1, 1]``), which
    is 1 unless the rotary scales (YaRN's attention_scaling); None for an attention called without one."""
    args, kwargs = inputs if isinstance(inputs, tuple) and len(inputs) == 2 else ((), {})
    pair = kwargs.get("position_embeddings") if isinstance(kwargs, dict) else None
    if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not torch.is_tensor(pair[0]):
        return None
    # GPT-J's and CodeGen's rotary (5.24 on) hands the attention (sin, cos), every other family's (cos, sin); read
    # as cos, the sin is 0 at position 0 and the relation would be off by the whole value
    cos = pair[1] if getattr(type(host), "SIN_FIRST", False) else pair[0]
    cos = cos.expand(keep.shape[0], *cos.shape[1:]) if cos.shape[0] == 1 else cos
    return cos[keep][:, 0, :1].double()[:, None, :]  # every rotated column turns by cos(0·θ) = the same factor


def _rotated_first(inputs: Any, keep: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``x`` ``[rows, heads, head_dim]`` turned by the cos and sin the attention is called with at column 0, halves
    paired (rotate_half): for a family whose first token is not at position 0 (a host's ``FIRST_POSITION``)."""
    cos, sin = (t.expand(keep.shape[0], *t.shape[1:]) if t.shape[0] == 1 else t
                for t in inputs[1]["position_embeddings"])
    cos, sin = cos[keep][:, 0].double()[:, None, :], sin[keep][:, 0].double()[:, None, :]
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


def _attention(host: Any) -> list[Relation]:
    if not isinstance(getattr(type(host), "W_O", None), type(ATTENTION["W_O"])):
        return []

    def output(h, r):
        premix = r["attention_premix"]  # [batch, seq, heads, head_dim]
        summed = torch.einsum("bshd,hdo->bso", premix.double(), h.W_O.double())
        return [(summed if h.b_O is None else summed + h.b_O.double(), r["attention_output"])]

    out = [Relation("attention_output == Σ over heads of attention_premix[h] · W_O[h] + b_O", (),
                    ("attention_premix", "attention_output"), output, SUBBLOCK)]
    if _layout(host).unmapped:
        return out
    own_kv = _readable(host, "W_K")  # False on a block that attends over another's keys and values (KV sharing)
    clip = _clip_text(host)

    broadcast = _layout(host).broadcast_kv

    def spread(kv, heads):  # [..., kv_heads, head_dim] -> [..., heads, head_dim], each group's head repeated
        return kv.repeat_interleave(heads // kv.shape[-2], dim=-2) if broadcast else kv

    # a cross-attention's keys and values are made of other states than its input (an encoder's output: KV_INPUT)
    kv_input = getattr(type(host), "KV_INPUT", None)
    kv_text = kv_input or "attention input"
    kv_reads = (kv_input,) if kv_input else ()

    def kv_of(r):
        return r[kv_input] if kv_input else first(r["input"])

    def values(h, r):
        x = kv_of(r)
        read = r["attention_values"]
        predicted = _clip(h, _project(x, h.W_V, h.b_V))
        predicted = predicted if v_norm is None else v_norm(predicted.float()).double()
        predicted = spread(predicted, read.shape[1]).transpose(1, 2)
        return [(predicted, read)]  # [batch, kv_heads, seq, head_dim]

    each = ", each repeated for its group's query heads as the forward broadcasts it" if broadcast else ""
    v_norm = getattr(host._module, "v_norm", None)  # Gemma 4's weightless RMS norm of each value head
    v = f"{kv_text} · W_V + b_V{clip}"
    if own_kv:
        out.append(Relation(f"attention_values == {f'v_norm({v})' if v_norm is not None else v}, per key/value head"
                            f"{each} (every position)", (), ("input", *kv_reads, "attention_values"), values, SUBBLOCK))
    normed = _has_qk_norm(host)
    scale = _key_scale(host)
    query_scale = _layout(host).query_scale
    l2 = getattr(host._module, "qk_norm", None)
    first_position = getattr(type(host), "FIRST_POSITION", None)  # a family whose first token is not at position 0

    def at_zero(h, r):
        """Rows whose first column is a real token: there the position is 0 however the family numbers positions."""
        x, keep = first(r["input"]), r["model.attention_mask"][:, 0].bool()
        queries = _clip(h, _project(x[keep, 0], h.W_Q, h.b_Q))
        # a KV-shared block's keys are not its own: a stand-in carried through and not compared
        keys = spread(_clip(h, _project(kv_of(r)[keep, 0], h.W_K, h.b_K)), r["attention_keys"].shape[1]) if own_kv \
            else queries
        if normed:
            queries = _normed(h, "q", queries).double()
            keys = _normed(h, "k", keys).double() if own_kv else keys
        if scale is not None:
            keys = keys * scale
        if query_scale is not None:
            queries = queries * getattr(h._module, query_scale)
        turn = _rotary_at_zero(h, r["inputs"], keep)
        if first_position is not None:
            queries, keys = _rotated_first(r["inputs"], keep, queries), _rotated_first(r["inputs"], keep, keys)
        elif turn is not None:
            queries, keys = queries * turn, keys * turn
        if l2 is not None:  # Llama 4's weightless L2 norm, after rotary
            queries, keys = l2(queries.float()).double(), l2(keys.float()).double()
        pairs = [(queries, r["attention_queries"][keep][:, :, 0])]
        return pairs + [(keys, r["attention_keys"][keep][:, :, 0])] if own_kv else pairs

    q = "attention input · W_Q + b_Q" + clip
    k = f"{kv_text} · W_K + b_K" + clip + each
    if normed:
        q, k = f"q_norm({q})", f"k_norm({k})"
    if query_scale:
        q = f"{query_scale} · ({q})"
    if scale is not None:
        k = f"key_multiplier · ({k})"
    if l2 is not None:
        q, k = f"qk_norm({q})", f"qk_norm({k})"
    what = f"attention_queries == {q}; attention_keys == {k}" if own_kv else \
        f"attention_queries == {q} (the block's keys are another block's: KV sharing)"
    where = ("at position 0 (where rotary, if any, turns nothing: it scales by cos(0), its attention_scaling)"
             if first_position is None else f"at each row's first token, turned by the cos and sin the attention is "
                                            f"called with there ({first_position})")
    out.append(Relation(f"{what}, {where}", (), ("model.attention_mask", "input", "inputs", *kv_reads, "attention_queries",
                                                 *(("attention_keys",) if own_kv else ())), at_zero, SUBBLOCK))
    return out


def _readable(host: Any, name: str) -> bool:
    """Whether ``host.<name>`` reads (a refusal for this one host, Gemma 4's KV-shared block, is False)."""
    from ..research.weights import WeightUnavailable

    try:
        getattr(host, name)
    except WeightUnavailable:
        return False
    return True


def _experts(host: Any) -> list[Relation]:
    """routed_output recomputed from the per-expert weights and the router's choice, slot by slot."""
    try:
        host.W_in  # noqa: B018 (the read raises when the layout is not mapped)
    except Exception:  # a layout nncanon does not map: the read says why, and nothing is claimed
        return []

    def slots(h, r):
        """[tokens, top_k, hidden]: each routing slot's expert on the input, weighted by the router."""
        x = rows(first(r["input"])).double()
        indices, weights = rows(r["expert_indices"]).long(), rows(r["expert_weights"]).double()
        act = h.experts._module.act_fn
        gate = torch.einsum("td,tkdi->tki", x, h.W_gate.double()[indices])
        up = torch.einsum("td,tkdi->tki", x, h.W_in.double()[indices])
        out = torch.einsum("tki,tkid->tkd", act(gate) * up, h.W_out.double()[indices])
        return out * weights[..., None]

    def routed(h, r):
        return [(slots(h, r).sum(1), rows(r["routed_output"]))]

    def each(h, r):
        """The slots as the host serves them: the link from the router's choice to what the slots sum to (the
        proof chain, generator/facts/chain.py)."""
        outputs = r["expert_outputs"]
        return [(slots(h, r), outputs.reshape(-1, *outputs.shape[-2:]))]

    return [Relation("routed_output == Σ over routing slots of expert_weights · (act_fn(input · W_gate[e]) · "
                     "(input · W_in[e])) · W_out[e], e = expert_indices", (),
                     ("input", "expert_indices", "expert_weights", "routed_output"), routed, SUBBLOCK),
            Relation("expert_outputs == expert_weights · (act_fn(input · W_gate[e]) · (input · W_in[e])) · W_out[e] "
                     "in each routing slot, e = expert_indices", (),
                     ("input", "expert_indices", "expert_weights", "expert_outputs"), each, SUBBLOCK)]


def _mlp(host: Any) -> list[Relation]:
    if getattr(type(host), "W_in", None) is EXPERTS["W_in"]:
        return _experts(host)
    if _layout(host).unmapped or not isinstance(getattr(type(host), "W_in", None), type(MLP["W_in"])):
        return []
    if type(host).W_in.dims.startswith("num_experts"):  # a family's own experts state their relation
        return []
    module = host._module
    down = getattr(module, "down_multiplier", None)
    gate_scale = getattr(module, "gate_multiplier", None)

    def output(h, r):
        neurons = r["mlp_neurons"].double()
        out = neurons @ h.W_out.double() + (0 if h.b_out is None else h.b_out.double())
        return [(rows(out * (1 if down is None else down)), rows(r["mlp_output"]))]

    times = "" if down is None else " (· down_multiplier)"
    relations = [Relation(f"mlp_output == (mlp_neurons · W_out + b_out){times}", (), ("mlp_neurons", "mlp_output"),
                          output, SUBBLOCK)]

    def act(h, x):
        return _act(h)(x.to(h.W_in.dtype))

    if _gated(host):
        sub_norm = getattr(type(host), "SUB_NORM", None)  # BitNet's ffn_sub_norm between act(gate) · up and down_proj

        def neurons(h, r):
            x = rows(first(r["input"])).double()
            pre = x @ h.W_gate.double() + (0 if h.b_gate is None else h.b_gate.double())
            activation = act(h, pre * (1 if gate_scale is None else gate_scale)).double()
            up = x @ h.W_in.double() + (0 if h.b_in is None else h.b_in.double())
            product = activation * up
            if sub_norm is not None:
                product = getattr(h._module, sub_norm)(product.to(h.W_in.dtype)).double()
            return [(activation, rows(r["mlp_activation"])), (product, rows(r["mlp_neurons"]))]

        g = "" if gate_scale is None else " · gate_multiplier"
        product = "mlp_activation · (input · W_in + b_in)"
        product = product if sub_norm is None else f"{sub_norm}({product})"
        relations.append(Relation(f"mlp_activation == act_fn((input · W_gate + b_gate){g}); mlp_neurons == {product}",
                                  (), ("input", "mlp_activation", "mlp_neurons"), neurons, SUBBLOCK))
    else:
        def ungated(h, r):
            x = rows(first(r["input"])).double()
            pre = x @ h.W_in.double() + (0 if h.b_in is None else h.b_in.double())
            return [(act(h, pre), rows(r["mlp_activation"]))]

        relations.append(Relation("mlp_activation == act_fn(input · W_in + b_in) (no gate)", (),
                                  ("input", "mlp_activation"), ungated, SUBBLOCK))
    return relations


def _gated(host: Any) -> bool:
    try:
        projection(host, "gate")
    except Exception:
        return False
    return True


def _root(host: Any) -> list[Relation]:
    if not isinstance(getattr(type(host), "W_U", None), type(ROOT["W_U"])):
        return []

    def head(m, r):
        before = getattr(m.family_module, "before_the_head", None)
        x = r["final_norm_output"]
        x = before(m, x) if before is not None else x
        out = x.double() @ m.W_U.double() + (0 if m.b_U is None else m.b_U.double())
        return [(out, r["lm_head_output"])]

    def embed(m, r):
        scale = getattr(m.embed_tokens._module, "embed_scale", None)
        rows_ = m.W_E[r["input_ids"]]
        if isinstance(scale, torch.Tensor):  # Gemma's, a buffer; BioGPT's a float
            scale = scale.to(rows_.dtype)
        return [(rows_ if scale is None else rows_ * scale, r["token_embeddings"])]

    # a head that is a transform before its tied decoder (RoBERTa's lm_head: no weight of its own) has no W_U to
    # state; its transform's and decoder's relations prove it. Post-norm encoders never serve final_norm_output
    one_linear = getattr(host.lm_head._module, "weight", None) is not None or not getattr(type(host), "FINAL_NORM", True)
    unembedding = [Relation("lm_head_output == final_norm_output · W_U + b_U", (), ("final_norm_output",
                                                                                      "lm_head_output"),
                            head, SUBBLOCK)] if one_linear else []
    return [*unembedding,
            # a row lookup (times the embedding's own scale, if any: one rounding): STEP
            Relation("token_embeddings == W_E[input_ids] (· the embedding's embed_scale, if it has one)", (),
                     ("input_ids", "token_embeddings"), embed, STEP)]


def _norm(host: Any, stem: str) -> Relation:
    """``<stem>_output`` recomputed in float64 from the norm's input, the served gain and bias and the module's eps:
    the formula of its kind, independent of the module's forward."""
    name, module = norm_module(host, stem)
    kind, form, eps = norm_kind(module), gain_form(module), norm_epsilon(module)
    centred = kind == "layernorm"

    def compute(h, r):
        x = first(r[f"{name}.input"]).double()
        if centred:
            x = x - x.mean(-1, keepdim=True)
        out = x * (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt()
        if form != "none":
            out = out * getattr(h, f"{stem}_w").double()
        bias = getattr(h, f"{stem}_b")
        out = out if bias is None else out + bias.double()
        return [(rows(out), rows(first(r[f"{stem}_output"])))]  # OPT serves its MLP norm token-flattened

    shape = "(x - mean(x)) / sqrt(var(x) + eps)" if centred else "x / sqrt(mean(x²) + eps)"
    gain = {"none": " (no weight: gain 1)", "weight": f" · {stem}_w",
            "1 + weight": f" · {stem}_w, {stem}_w = 1 + {name}.weight"}[form]
    bias = f" + {stem}_b" if getattr(module, "bias", None) is not None else ""
    # the forward's float32 norm: a sum of squares over the width (width roundings) and a few elementwise steps,
    # recomputed in float64: STEP while the width stays within its roundings, else SUBBLOCK
    width = module.weight.numel() if getattr(module, "weight", None) is not None else STEP_ROUNDINGS
    tolerance = STEP if width + 8 <= STEP_ROUNDINGS else SUBBLOCK
    return Relation(f"{stem}_output == {kind}({name}.input): {shape}{gain}{bias}, eps = {eps:g}", (),
                    (f"{name}.input", f"{stem}_output"), compute, tolerance)


def _norms(host: Any) -> list[Relation]:
    return [_norm(host, stem) for stem in gains(host)]


def relations(host: Any) -> list[Relation]:
    """The relations proving ``host``'s weights (none for a host without weights)."""
    try:
        return _attention(host) + _mlp(host) + _root(host) + _norms(host)
    except Exception as error:  # noqa: BLE001 -- a weight that cannot be resolved is a failed claim, named
        raise RuntimeError(f"{host._standard_path()}: the weights' relations cannot be built: "
                           f"{type(error).__name__}: {error}") from error
