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


def _label(block: int, term: str) -> str:
    """``i_attn``, ``i_mlp``, or ``i_mixer`` for a sequence mixer that is not softmax attention (SSD, DeltaNet)."""
    if "mlp" in term or "feedforward" in term:
        kind = "mlp"
    elif term.startswith(("self_attn", "post_attention", "attention")):
        kind = "attn"
    else:
        kind = "mixer"
    return f"{block}_{kind}"


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
            labels.append(_label(i, term))
            # Granite and MiniCPM3 scale both branches (nncanon.parts.blocks.scaled): residual_multiplier, residual_scale
            module = block._module
            scales.append(next((v for v in (getattr(module, "residual_multiplier", None),
                                            getattr(module, "residual_scale", None)) if v is not None), None))
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
    weight = getattr(norm, "weight", None)
    if eps is None or weight is None:
        raise NotDecomposable(f"the final norm ({type(norm).__name__}) has no eps and weight nncanon reads")
    return float(eps), weight, getattr(norm, "bias", None)


def apply_final_norm(model: Any, stack: torch.Tensor, stream: torch.Tensor) -> torch.Tensor:
    """Each ``[..., batch, seq, hidden]`` component of ``stream`` through the final norm's linear part: centred if
    the norm centres, divided by the norm's scale of ``stream`` (the full residual), times the gain. On the full
    stream that map is ``norm(stream) - bias``, checked on every call with the gain read as ``weight`` or, for a
    norm that scales by ``1 + weight`` (Gemma's), as that; so a decomposition's shares sum to it."""
    norm = model.norm._module
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
    raise NotDecomposable(f"{model.family}: the final norm ({type(norm).__name__}) is not (x - centre) / scale · gain "
                          f"+ bias, so its linear part is not applied to a stack")
