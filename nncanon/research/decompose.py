"""The residual stream taken apart, as TransformerLens's ``accumulated_resid``, ``decompose_resid`` and ``apply_ln_to_stack``.

    labels, stack = nncanon.decompose.accumulated(model, prompts)   # [blocks + 1, batch, seq, hidden]
    labels, parts = nncanon.decompose.components(model, prompts)    # embed, 0_attn, 0_mlp, 1_attn, ...
    logits = model.lm_head(nncanon.decompose.apply_final_norm(model, parts, stack[-1]))  # each part's share

``components`` reads, on every block, what the block adds to the stream: the terms its residual relations name
(``adds``: ``self_attn.attention_output`` and ``mlp.mlp_output`` on Llama; the sandwich norms' outputs on Gemma 2;
the mixer's on Mamba-2), each scaled as the block scales it (Granite's residual_multiplier, MiniCPM3's residual_scale). Their sum with the
stream entering block 0 is the last block's output, on sequential and parallel blocks alike; a family whose adds
do not sum to it (a branch the relations scale in ways this module does not read) is refused, never decomposed
wrongly: the sum is checked on every call.

``apply_final_norm`` is the final norm's linear part applied to each component: each is centred (a LayerNorm
centres) and divided by the norm's scale of the *full* stream, then multiplied by its gain, so the components'
sum is the final norm's output less its bias. The caveat is TransformerLens's: the scale belongs to the stream,
not to any part, so a part's share is a linearisation at this stream.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.precision import SUBBLOCK
from ..core.relations import error as relative_error
from ..core.relations import first


class NotDecomposable(ValueError):
    """The family's blocks add terms this module cannot read as a sum: the message names the family."""


def _read(model: Any, wanted: list[tuple[Any, str]], inputs: tuple, kwargs: dict) -> list[Any]:
    """Every (envoy, attribute) of ``wanted`` in one forward, each in an invoke of its own so they need no order."""
    saved = []
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(*inputs, **kwargs):
            pass
        for envoy, attr in wanted:
            with tracer.invoke():
                saved.append(getattr(envoy, attr).save())
    return [first(x) for x in saved]


def _adds(block: Any) -> list[str]:
    """The terms (relative to the block) its residual relations add to the stream, in order."""
    mixer = next((name for name in getattr(type(block), "MIXERS", ()) if hasattr(block, name)), None)
    terms = []
    for relation in getattr(type(block), "RELATIONS", ()):
        relation = relation.on(mixer)
        if relation.adds and relation.adds[1] not in terms:
            terms.append(relation.adds[1])
    return terms


def _target(block: Any, term: str) -> tuple[Any, str]:
    *parts, attr = term.split(".")
    envoy = block
    for part in parts:
        envoy = getattr(envoy, part)
    return envoy, attr


def _label(block: int, term: str, terms: list[str] | None = None) -> str:
    """``i_attn``, ``i_mlp``, or ``i_mixer`` for a sequence mixer that is not softmax attention (SSD, DeltaNet). A
    post-norm named for neither (HyperCLOVA X's ``post_norm1``) is read by its place among the block's ``terms``:
    the first normed add of a sequential block is its attention's, the second its MLP's."""
    name = term.split(".")[0]
    if "mlp" in name or "feedforward" in name or "ffn" in name:
        kind = "mlp"
    elif term.startswith(("self_attn", "post_attention", "attention")) or "attn" in name or "attention" in name:
        kind = "attn"
    elif terms and len(terms) == 2 and all(t.endswith(".output") and "norm" in t for t in terms):
        kind = ("attn", "mlp")[terms.index(term)]
    else:
        kind = "mixer"
    return f"{block}_{kind}"


def _scale(block: Any) -> float | None:
    """What the block scales each branch by before its add: Granite's residual_multiplier, MiniCPM3's
    residual_scale (nncanon.parts.blocks.scaled); None for a block that adds its branches as they are."""
    module = block._module
    return next((v for v in (getattr(module, "residual_multiplier", None), getattr(module, "residual_scale", None))
                 if v is not None), None)


def accumulated(model: Any, *inputs: Any, **kwargs: Any) -> tuple[list[str], torch.Tensor]:
    """The stream entering every block and leaving the last: ``[blocks + 1, batch, seq, hidden]``, labelled
    ``0_pre ... {n-1}_pre, final_post`` (TransformerLens's accumulated_resid)."""
    blocks = [model.layers[i] for i in range(len(model.layers))]
    wanted = [(block, "layer_input") for block in blocks] + [(blocks[-1], "layer_output")]
    read = _read(model, wanted, inputs, kwargs)
    return [f"{i}_pre" for i in range(len(blocks))] + ["final_post"], torch.stack(read)


def components(model: Any, *inputs: Any, **kwargs: Any) -> tuple[list[str], torch.Tensor]:
    """The stream entering block 0 (``embed``: token embeddings and any position embeddings) and what every block
    adds to it (``i_attn``, ``i_mlp``): ``[1 + adds, batch, seq, hidden]``, summing to the last block's output."""
    blocks = [model.layers[i] for i in range(len(model.layers))]
    wanted, labels, scales = [(blocks[0], "layer_input")], ["embed"], [None]
    for i, block in enumerate(blocks):
        for term in _adds(block):
            wanted.append(_target(block, term))
            labels.append(_label(i, term, _adds(block)))
            scales.append(_scale(block))
    wanted.append((blocks[-1], "layer_output"))
    read = _read(model, wanted, inputs, kwargs)
    parts = [x if scale is None else x * scale for x, scale in zip(read[:-1], scales)]
    stack = torch.stack(parts)
    # the sum of 2·blocks + 1 streams in another order than the forward's adds: a rounding per add (SUBBLOCK)
    off = relative_error(stack.sum(0), read[-1])
    if not off <= SUBBLOCK:
        raise NotDecomposable(f"{model.family}: the terms its blocks' relations add ({', '.join(_adds(blocks[0]))}) do "
                              f"not sum to layers[-1].layer_output (off by {off:.3g}): the block scales a branch in a "
                              f"way nncanon.decompose does not read")
    return labels, stack


def _norm_parts(norm: torch.nn.Module) -> tuple[float, torch.Tensor, torch.Tensor | None]:
    """(eps, weight, bias) of a LayerNorm or an RMSNorm module."""
    eps = next((getattr(norm, name) for name in ("eps", "variance_epsilon", "epsilon") if hasattr(norm, name)), None)
    if eps is None:
        from .norm_forms import WeightUnavailable, norm_epsilon

        try:
            eps = norm_epsilon(norm)
        except WeightUnavailable:
            raise NotDecomposable(f"the norm ({type(norm).__name__}) has no eps nncanon reads") from None
    weight = getattr(norm, "weight", None)
    if weight is None:  # a norm with no learned gain (OLMo's, NanoChat's): a gain of one
        weight = torch.ones(())
    return float(eps), weight, getattr(norm, "bias", None)


def _linear_part(norm: torch.nn.Module, stack: torch.Tensor, stream: torch.Tensor, where: str) -> torch.Tensor:
    """``stack`` through ``norm``'s linear part at ``stream`` (its full input), checked on ``stream`` itself."""
    eps, weight, bias = _norm_parts(norm)
    full = stream.double()
    with torch.no_grad():
        target = norm(stream).double() - (0 if bias is None else bias.double())
    for centres in (True, False):  # a LayerNorm (Cohere's has no bias) or an RMSNorm
        centre = (lambda x: x - x.mean(-1, keepdim=True)) if centres else (lambda x: x)
        scale = (centre(full).pow(2).mean(-1, keepdim=True) + eps).sqrt()
        for gain in (weight.detach().double(), 1 + weight.detach().double()):
            # the linear part on the full stream is the norm less its bias (hidden_size squares and a root:
            # SUBBLOCK); on a stack it is the same map, so the components' shares sum to it
            if relative_error(centre(full) / scale * gain, target) <= SUBBLOCK:
                return (centre(stack.double()) / scale * gain).to(stack.dtype)
    raise NotDecomposable(f"{where} ({type(norm).__name__}) is not (x - centre) / scale · gain + bias, so its linear "
                          f"part is not applied to a stack")


def apply_final_norm(model: Any, stack: torch.Tensor, stream: torch.Tensor) -> torch.Tensor:
    """Each ``[..., batch, seq, hidden]`` component of ``stream`` through the final norm's linear part: centred if
    the norm centres, divided by the norm's scale of ``stream`` (the full residual), times the gain. On the full
    stream that map is ``norm(stream) - bias``, checked on every call with the gain read as ``weight`` or, for a
    norm that scales by ``1 + weight`` (Gemma's), as that; so a decomposition's shares sum to it (with
    ``model.final_norm_b`` the rest)."""
    return _linear_part(model.norm._module, stack, stream, f"{model.family}: the final norm")


def unembedding_bias(model: Any, token: int, head: bool = True) -> torch.Tensor:
    """What no part owns in ``token``'s ``lm_head_output``: the final norm's bias through the token's unembedding row
    (``final_norm_b · W_U[:, token]``) and, with ``head``, the head's own bias (``b_U[token]``); zero without them.
    A family whose head is not one linear map of the final norm's output (MiniCPM3 scales the stream between them,
    ModernBERT's head is a transform before its decoder) has no share of a logit through ``W_U``: refused."""
    if getattr(model.family_module, "before_the_head", None) is not None:
        raise NotDecomposable(f"{model.family}: the model changes the final norm's output before its head, so a "
                              f"part's share of a logit is not its normed part through W_U")
    if getattr(model.lm_head._module, "weight", None) is None:
        raise NotDecomposable(f"{model.family}: its head ({type(model.lm_head._module).__name__}) is not one linear "
                              f"map, so a part's share of a logit is not its normed part through W_U")
    direction = model.W_U[:, token]
    bias = _norm_parts(model.norm._module)[2]
    total = torch.zeros((), dtype=direction.dtype) if bias is None else bias.detach().to(direction.dtype) @ direction
    head_bias = getattr(model.lm_head._module, "bias", None) if head else None
    return total if head_bias is None else total + head_bias.detach()[token].to(total.dtype)


def attention_heads(model: Any, layer: int, results: torch.Tensor,
                    attention_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(per_head, rest)``: each head's part of what block ``layer``'s attention adds to the stream, and the part
    no head owns, from its ``attention_head_results`` (``[..., heads, hidden]``) and its ``attention_output``
    (``[..., hidden]``) at the same positions. ``per_head.sum(-2) + rest`` is the block's attention term of
    :func:`components`: the heads' results plus the output projection's bias (``rest``: ``b_O``, zero without
    one), through the post-attention norm's linear part at ``attention_output`` where the block norms what its
    attention adds (Gemma 2's sandwich; the post-norm's bias joins ``rest``), scaled as the block scales it."""
    block = model.layers[layer]
    term = next((t for t in _adds(block) if _label(layer, t, _adds(block)).endswith("_attn")), None)
    if term is None:
        raise NotDecomposable(f"{model.family}: block {layer} adds no attention to the stream (it adds "
                              f"{', '.join(_adds(block)) or 'nothing'})")
    bias = getattr(block.self_attn, "b_O", None)
    rest = torch.zeros_like(attention_output) if bias is None else bias.detach().to(attention_output.dtype).expand_as(
        attention_output)
    norm = _post_norm(block, term)
    if norm is not None:  # a post-sublayer norm on the block: its linear part at what the attention returned
        where = f"{model.family}: block {layer}'s {term.removesuffix('_output').removesuffix('.')}"
        per_head = _linear_part(norm, results, attention_output.unsqueeze(-2), where)
        normed_rest = _linear_part(norm, rest, attention_output, where)
        norm_bias = getattr(norm, "bias", None)
        rest = normed_rest if norm_bias is None else normed_rest + norm_bias.detach().to(rest.dtype)
    elif term not in ("self_attn.attention_output", "self_attn.output"):  # the attention module's own output
        raise NotDecomposable(f"{model.family}: block {layer}'s attention adds {term}, not its attention_output or a "
                              f"norm of it")
    else:
        per_head = results
    scale = _scale(block)
    return (per_head, rest) if scale is None else (per_head * scale, rest * scale)


def _post_norm(block: Any, term: str) -> torch.nn.Module | None:
    """The norm module whose output ``term`` is (``attention_post_norm_output``, a standard value, or
    ``post_attention_layernorm.output``, a module's), or None where the block adds its attention as it is."""
    if term.endswith("_norm_output") and "." not in term:
        from .weights import norm_module

        found = norm_module(block, term.removesuffix("_output"))
        return None if found is None else found[1]
    if term.endswith(".output"):
        envoy, _ = _target(block, term)
        module = getattr(envoy, "_module", None)
        return module if isinstance(module, torch.nn.Module) and hasattr(module, "weight") else None
    return None
