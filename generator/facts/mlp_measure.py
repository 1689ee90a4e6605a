"""What a block's MLP computes, measured on a forward of the tiny checkpoint, never read off module names.

Gated: what its output projection reads is the product of two projections of its input (two modules reading it,
or one twice as wide, split in halves), so the projections reading the input are twice as wide as what the output
projection reads. Plain: one projection as wide as what the output projection reads. LFM2's w1 / w3 / w2, named
unlike Llama's gate_proj / up_proj / down_proj, read as a plain MLP while module names decided it (issue 48). A
mixture is an MLP whose standard host serves a router's logits (its routing relation is proven on them), with a
shared expert when that host serves one's output.
"""

from __future__ import annotations

from typing import Any

from generator.facts.norm_placement import _is_norm, _same


def _projections(scope: Any, exclude: set[int], seen: dict[int, list]) -> list:
    """The modules of ``scope`` (outside ``exclude``) that carry weights of their own and are no norm, in the order
    their first calls finished: the MLP's projections (and a learned activation's coefficients)."""
    order = {key: index for index, key in enumerate(seen)}
    leaves = [m for m in scope.modules() if m is not scope and id(m) not in exclude and id(m) in order
              and next(m.children(), None) is None and next(m.parameters(recurse=False), None) is not None]
    leaves.sort(key=lambda m: order[id(m)])
    return [m for m in leaves if seen[id(m)][0] is not None and not _is_norm(m, seen[id(m)][0])]


def dense_kind(scope: Any, exclude: set[int], seen: dict[int, list]) -> str:
    """"gated", "plain", "none" (nothing with weights outside the mixer: Mamba's block) or "other" for ``scope``, the
    MLP module, or the block itself minus its mixer (``exclude``) where the MLP has no module of its own (OPT's fc1,
    fc2; BERT's intermediate, output)."""
    projections = _projections(scope, exclude, seen)
    if len(projections) < 2:
        return "none" if not projections else "other"
    first, last = seen[id(projections[0])][0], projections[-1]
    # the output projection is the last to finish; the input is what the first projection read
    readers = [m for m in projections[:-1] if _same(seen[id(m)][0], first)]
    read = seen[id(last)][0].shape[-1]
    wide = sum(seen[id(m)][1].shape[-1] for m in readers)
    return "gated" if wide == 2 * read else "plain" if wide == read else "other"


def fused_gate_up(mlp: Any, seen: dict[int, list]) -> bool:
    """A gated MLP whose gate and up halves come from one projection of its input (phi3's gate_up_proj, glm4's): one
    module reads the input, twice as wide as what the output projection reads."""
    projections = _projections(mlp, set(), seen)
    if len(projections) < 2 or dense_kind(mlp, set(), seen) != "gated":
        return False
    first = seen[id(projections[0])][0]
    return sum(_same(seen[id(m)][0], first) for m in projections[:-1]) == 1


def mlp_kind(block: Any, skip: list, mlp: Any, seen: dict[int, list], beside: Any = None) -> str | None:
    """The kind of a block's MLP, or None where the forward did not run it (mllama's cross-attention blocks on a text
    call). ``block`` is the standard block envoy; ``mlp`` its native MLP module (None where it has none) and ``skip``
    its other sublayers' (the mixer, a decoder's cross-attention); ``beside``: a shared expert beside the mixture
    rather than in it (granitemoehybrid's)."""
    try:
        names = {v.name for v in type(block.mlp).values()}
    except AttributeError:
        names = set()
    if "router_logits" in names:  # a mixture's host: its routing relation is proven on the router's logits
        shared = beside is not None or "shared_expert_output" in names
        return "mixture + shared expert" if shared else "mixture"
    if mlp is not None:
        return dense_kind(mlp, set(), seen) if id(mlp) in seen else None
    inside = {id(m) for sub in skip if sub is not None for m in sub.modules()}
    return dense_kind(block._module, inside, seen)
