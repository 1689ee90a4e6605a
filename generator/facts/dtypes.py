"""Half precision verified: the tiny checkpoint loaded in bfloat16 and in float16, every relation on every block
checked at each dtype, and every writable value's edit on the first block of each kind, as the float32 loads are
(generator/facts/proof.py, edits.py).

A relation holds at a dtype within the bound the error model derives for its chain at that dtype's unit roundoff
(`nncanon.core.precision.bound`): its recomputation reads the values the half-precision forward made, so it compares
against that forward's roundings. One that does not hold fails the build, unless the relation says why it cannot hold
in a half dtype (``Relation.half``: a top-k over rounded scores is a discrete choice, not a rounding), or the forward
overflowed (a value not finite where the float64 recompute is: float16's range ends at 65504). Those two the page
states, with the measured error's order of magnitude.

An edit's question at a dtype is whether it lands, which does not depend on the block (float32 proves every kind on
its first block too): each writable value on the first block of each kind is edited in float16, in place and by
assignment, both must move the logits, and the two paths' logits agree within the error model's bound on two
evaluations of the forward after the edit (``nncanon.core.precision.forward_bound``). bfloat16's edits are the same
writes into the same storage wherever its forward dispatches float16's operator graph (generator/facts/op_graph.py);
where it does not (a dtype-dependent branch: T5's float16 clamp), they are edited again in bfloat16.

One load per dtype, with eager attention, which serves every value (the pattern and the scores), so every relation
gets its terms; a family with fused experts has two, batched_mm experts and eager ones (transformers' default,
grouped_mm, refuses a half dtype at a tiny model's widths: its strides must be multiples of 16 bytes); a vision family
adds its image call. A relation float32 proved that no load of a dtype serves is listed with the reason. The facts hold
what is the same on every CPU: per dtype the bounds, how many checks held, the relations that cannot hold with their
error's nearest decade; the edits (``dtype_edits``) hold no number. It runs as a stage of its own after the facts
(generator/facts/dtype_runs.py): ``make site`` on every family, ``generator verify --dtypes`` when asked.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from generator.facts.edits import prove_edits
from generator.facts.loads import Load, Models, load
from generator.facts.measure import run_inputs
from generator.facts.proof import RelationError, listed, measured, pattern, planned, read_all
from generator.recipe.family import Family
from nncanon.core.precision import LEVELS, bound, forward_bound

#: the dtypes verified beside the tiny checkpoint's float32
DTYPES = ("bfloat16", "float16")


def dtype_kwargs(models: Models) -> list[tuple[tuple[str, Any], ...]]:
    """The implementations each dtype's loads ask for: eager attention; where the family's float32 loads have fused
    experts, once with batched_mm experts (the one tensor of every slot's output; grouped_mm refuses a half dtype at a
    tiny model's widths) and once eager (the loop over experts)."""
    if "experts eager" not in models.loads:
        return [(("attn_implementation", "eager"),)]
    return [(("attn_implementation", "eager"), ("experts_implementation", fused)) for fused in ("batched_mm", "eager")]


def dtype_loads(models: Models, dtype: str) -> list[Load]:
    """One dtype's loads: :func:`dtype_kwargs`'s, each in ``dtype``, and a vision family's image call."""
    import torch

    own = [(*kwargs, ("dtype", getattr(torch, dtype))) for kwargs in dtype_kwargs(models)]
    loads = [Load(dtype if n == 0 else f"{dtype} experts eager", kwargs=kwargs) for n, kwargs in enumerate(own)]
    # a recurrent family's kernel routes, over the dtype's first load as the float32 ones are over theirs
    loads += [Load(f"{dtype} {route.label}", base=dtype, context=route.context) for route in models.all if route.base]
    if "image" in models.loads:
        loads.append(Load(f"{dtype} image", task="image-text-to-text", kwargs=own[0]))
    return loads


def bounds(dtype: str) -> dict[str, str]:
    """Each level's bound at ``dtype``, as the page shows it ("none": the chain leaves no bound)."""
    return {name: "none" if (b := bound(level, dtype)) is None else f"{b:.3g}" for name, (level, _) in LEVELS.items()}


def decade(error: float) -> str:
    """An error's nearest power of ten: the digits below it are the CPU's kernels', its order of magnitude is not."""
    return "inf" if math.isinf(error) else f"1e{round(math.log10(error)) if error > 0 else -99}"


def _not_finite(read: dict[tuple[str, str], Any]) -> set[str]:
    """The values a forward read as NaN or +inf (-inf is a mask's): an overflow to state."""
    import torch

    return {f"{pattern(path)}.{attr}" for (path, attr), value in read.items()
            if isinstance(value, torch.Tensor) and value.dtype.is_floating_point
            and bool((torch.isnan(value) | (value == float("inf"))).any())}


def check_relations(family: Family, models: Models, family_module: Any, prompts: list[str], dtype: str,
                    float32: set[tuple[str, str]] = frozenset()) -> dict:
    """Every relation under every load of ``models`` (one dtype's) against its bound at ``dtype``; ``float32``, the
    (host, text) of the relations the float32 loads held."""
    results: dict[tuple, Any] = {}
    served: dict[tuple[str, str], set[str]] = defaultdict(set)
    held: dict[tuple[str, str], int] = defaultdict(int)  # the blocks each relation held on
    cannot: dict[tuple[str, str], dict] = {}
    failed: dict[str, str] = {}
    overflowed: set[str] = set()
    for each in models.all:
        model = models.get(each.label)
        with each.within(model):  # a kernel route is entered around its use only
            args, kwargs = run_inputs(model, family_module, prompts)
            plan, wanted = planned(family, model, each.label, results, served)
            read = read_all(model, wanted, args, kwargs)
        overflowed |= _not_finite(read)
        for envoy, relation, _, _, worst in measured(plan, read):
            key = (pattern(envoy._std_path), relation.text)
            limit = bound(relation.tolerance, dtype)
            if isinstance(worst, Exception):
                failed.setdefault(repr(relation.text), f"cannot be computed on {envoy._std_path} in {dtype}: "
                                                       f"{type(worst).__name__}: {worst}")
            elif limit is not None and worst <= limit:
                held[key] += 1
            elif relation.half or math.isinf(worst) or limit is None:
                why = relation.half or ("the forward's value is not finite where the float64 recompute is: it "
                                        f"overflows {dtype}" if math.isinf(worst) else
                                        f"its chain's roundings leave no bound in {dtype}")
                entry = cannot.setdefault(key, {"host": key[0], "text": key[1], "why": why, "error": 0.0})
                entry["error"] = max(entry["error"], worst)
            else:
                failed.setdefault(repr(relation.text), f"does not hold on {envoy._std_path} in {dtype}: off by "
                                                       f"{worst:.3g} (the error model's bound {limit:.3g})")
    if failed:
        raise RelationError(family.family, f"relations in {dtype}", listed(failed, "does not hold", "do not hold", ""))
    # a relation float32 proved that no load of this dtype could serve the terms of: the page says why
    unserved = {(c.host, c.text): next(iter(c.skipped.values())) for c in results.values()
                if (c.host, c.text) not in held.keys() | cannot.keys() and (c.host, c.text) in float32}
    # a relation that cannot hold is counted nowhere: on which blocks its error happened to fall inside the bound is
    # the CPU's kernels' doing
    checks = {key: count for key, count in held.items() if key not in cannot}
    return {"bounds": bounds(dtype), "relations": len(checks), "checks": sum(checks.values()),
            "cannot_hold": [{**entry, "error": decade(entry["error"])} for _, entry in sorted(cannot.items())],
            "not_served": [{"host": host, "text": text, "why": why} for (host, text), why in sorted(unserved.items())],
            "not_finite": sorted(overflowed)}


def same_graph(full: Models, other: Models, family_module: Any, prompts: list[str], steps: int) -> bool:
    """Whether every load of ``other`` dispatches the operator graph of ``full``'s load in its place
    (generator/facts/op_graph.py): then an edit lands in ``other``'s dtype exactly where it lands in ``full``'s."""
    from generator.facts.op_graph import op_graph

    def graph(models: Models, each: Load) -> list:
        model = models.get(each.label)
        with each.within(model):
            return op_graph(model, *run_inputs(model, family_module, prompts), steps=steps)

    return all(graph(full, a) == graph(other, b) for a, b in zip(full.all, other.all, strict=True))


def half_edits(family: Family, family_module: Any, halves: dict[str, Models], prompts: list[str]) -> dict:
    """Every writable value's edit on the first block of each kind, in place and by assignment, proven in float16
    (where the error model's bound on the two paths is tighter than bfloat16's); in bfloat16 again only where its
    forward's operator graph is not float16's (a dtype-dependent branch or cast), since where it is, each edit
    reaches the same storage's readers in both. ``graph``: the dtypes whose edits the graph carried."""
    from generator.facts.edits import forward_blocks

    # the widest forward of any load (an image load's runs the tower's blocks too): the page's bound
    blocks, level = max((forward_blocks(halves["float16"].get(each.label)) for each in halves["float16"].all),
                        key=lambda found: forward_bound(found[0], "float16", found[1]) or float("inf"))
    facts: dict = {"bounds": {dtype: "none" if (b := forward_bound(blocks, dtype, level)) is None else f"{b:.3g}"
                              for dtype in DTYPES}, "graph": {}}
    landed = prove_edits(family, halves["float16"], family_module, prompts, "float16")
    facts["float16"] = sorted(f"{e['host']}.{e['value']}" for e in landed)
    # an edit at a decode step runs the cache's code too: the graphs compared are then a generate's
    steps = 2 if any(e["reaches"] != "this call" for e in landed) else 0
    if same_graph(halves["float16"], halves["bfloat16"], family_module, prompts, steps):
        facts["bfloat16"], facts["graph"]["bfloat16"] = facts["float16"], "float16"
    else:
        landed = prove_edits(family, halves["bfloat16"], family_module, prompts, "bfloat16")
        facts["bfloat16"] = sorted(f"{e['host']}.{e['value']}" for e in landed)
    return facts


def verify_dtypes(family: Family, family_module: Any, models: Models, prompts: list[str], relations: list[dict]) -> dict:
    """``{"dtypes": ..., "dtype_edits": ...}``: each dtype's relations and its edits (:func:`half_edits`);
    ``models``, the float32 loads (:func:`dtype_loads` follows them); ``relations``, their relation facts."""
    float32 = {(r["host"], r["text"]) for r in relations if r["errors"]}
    facts: dict = {"loads": [dict(kwargs) for kwargs in dtype_kwargs(models)], "float32": {"bounds": bounds("float32")}}
    halves = {dtype: Models(models.checkpoint, dtype_loads(models, dtype),
                            lambda **kw: load(family, family_module, models.checkpoint, **kw)) for dtype in DTYPES}
    try:
        for dtype in DTYPES:
            facts[dtype] = check_relations(family, halves[dtype], family_module, prompts, dtype, float32)
        edits = half_edits(family, family_module, halves, prompts)
    finally:
        for half in halves.values():
            half.close()
    facts["verified"] = ["float32", *DTYPES]
    return {"dtypes": facts, "dtype_edits": edits}
