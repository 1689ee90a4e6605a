"""Where a block's norms sit, measured on the forward: before a sublayer, on its output (before the add), or
both (a sandwich). Never read off module names: a norm is found by where its input comes from and where its
output goes in a forward of the tiny checkpoint, and is a norm because its output does not change when its
input is scaled (issue 48: glm4's post_self_attn_layernorm / post_mlp_layernorm, named unlike Gemma's, made a
sandwich block read as pre-norm).
"""

from __future__ import annotations

from typing import Any

#: the two scales a candidate norm is run at: both far above any epsilon, so a norm gives the same output at both
_SCALES = (10.0, 1000.0)


def _first_tensor(args: tuple, kwargs: dict) -> Any:
    import torch

    for value in (*args, kwargs.get("hidden_states"), *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value
    return None


def _out(output: Any) -> Any:
    return output[0] if isinstance(output, (tuple, list)) else output  # GPT-1's modules return lists


def _same(a: Any, b: Any) -> bool:
    import torch

    # the same tensor handed on, or recomputed in the same float32 ops: equal to rounding of the stream's scale
    if a is None or b is None or a.shape != b.shape:
        return False
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-30)
    return bool(torch.allclose(a, b, rtol=0, atol=1e-5 * scale))


def _is_norm(module: Any, x: Any) -> bool:
    """Scale invariance, measured: the module's output at two scales of its input agrees (a norm divides the scale
    out); a projection, an activation or a multiplier scales with it."""
    import torch

    try:
        with torch.no_grad():
            low, high = (_out(module(x * s)) for s in _SCALES)
    except Exception:  # a module that takes more than one tensor is not a norm of the stream
        return False
    if not isinstance(low, torch.Tensor) or low.shape != x.shape:
        return False
    scale = max(float(low.abs().max()), 1e-30)
    return bool(torch.allclose(low, high, rtol=0, atol=1e-3 * scale))


def placements(blocks: list[tuple[Any, Any, Any]], run: Any) -> list[set[str]]:
    """The norm positions found on each block: "pre-mixer", "post-mixer", "pre-mlp", "post-mlp", and "after-add"
    where the block's output is a norm's (the stream itself normed after the add: BERT's, OPT-350m's).

    ``blocks``: (block, mixer, mlp) native modules per block (mixer or mlp None where the block has none); ``run``
    runs the model's forward once. A candidate is any module of a block outside its mixer and MLP; for "after-add",
    any module of the block (BERT's last norm sits in its output sublayer)."""
    return placements_seen(blocks, record(blocks, run))


def record(blocks: list[tuple[Any, Any, Any]], run: Any) -> dict[int, list]:
    """The input and output of the first call of every module of the blocks in one forward (``run``), by id, in the
    order the calls finished (generator/facts/mlp_measure.py reads the MLPs' from the same forward)."""
    seen: dict[int, list] = {}

    def keep(key: int):
        def hook(module, args, kwargs, output):
            if key not in seen:  # the first call: a module shared across blocks is called again later
                seen[key] = [_first_tensor(args, kwargs), _out(output)]
        return hook

    modules = {id(m): m for block, _, _ in blocks for m in block.modules()}
    hooks = [m.register_forward_hook(keep(key), with_kwargs=True) for key, m in modules.items()]
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def placements_seen(blocks: list[tuple[Any, Any, Any]], seen: dict[int, list]) -> list[set[str]]:
    """:func:`placements` over a forward already recorded (:func:`record`)."""
    candidates = []
    for block, mixer, mlp in blocks:
        inside = {id(m) for sub in (mixer, mlp) if sub is not None for m in sub.modules()}
        candidates.append([m for m in block.modules() if m is not block and id(m) not in inside])
    found = [_found(seen, mixer, mlp, own) for (_, mixer, mlp), own in zip(blocks, candidates)]
    for (block, _, mlp), where, own in zip(blocks, found, candidates):
        if _after_add(seen, block):
            where.add("after-add")
            if _normed_residual(seen, block, mlp, own):
                where.discard("pre-mlp")
    return found


def _normed_residual(seen: dict, block: Any, mlp: Any, candidates: list) -> bool:
    """The norm the MLP reads is also the residual its output is added to, and that sum is normed again into the
    block's output (GPT-1's ln_1, ln_2): a norm after the attention's add, not a pre-norm of the MLP."""
    mlp_in, mlp_out = seen.get(id(mlp), (None, None))
    _, out = seen.get(id(block), (None, None))
    if mlp_in is None or mlp_out is None or out is None or getattr(mlp_in, "shape", None) != getattr(mlp_out, "shape", 0):
        return False
    return any(_same(x, mlp_in + mlp_out) and _same(y, out) for m in candidates
               for x, y in [seen.get(id(m), (None, None))] if x is not None)


def _after_add(seen: dict, block: Any) -> bool:
    _, out = seen.get(id(block), (None, None))
    return any(_same(y, out) and _is_norm(m, x) for m in block.modules() if m is not block
               for x, y in [seen.get(id(m), (None, None))] if x is not None)


def _found(seen: dict, mixer: Any, mlp: Any, candidates: list) -> set[str]:
    mixer_in, mixer_out = seen.get(id(mixer), (None, None))
    mlp_in, mlp_out = seen.get(id(mlp), (None, None))
    found = set()
    for module in candidates:
        x, y = seen.get(id(module), (None, None))
        if x is None or not _is_norm(module, x):
            continue
        # what a norm feeds decides first: a mixer that adds the residual itself (BLOOM's) hands the MLP's norm
        # the sum, which is that norm's input and the mixer's output at once
        if _same(y, mixer_in):
            found.add("pre-mixer")
        elif _same(y, mlp_in):
            found.add("pre-mlp")
        elif mlp is None and _same(x, mixer_out) and _feeds(seen, module, y, candidates):
            # an encoder's MLP is no module of its own (intermediate, then output.dense): a norm of the attention
            # wrapper's sum that another module of the block reads is the MLP's pre-norm (XLM-R XL's LayerNorm,
            # RoBERTa-PreLayerNorm's intermediate.LayerNorm), not a norm of the attention's output
            found.add("pre-mlp")
        elif _same(x, mixer_out):
            found.add("post-mixer")
        elif _same(x, mlp_out):
            found.add("post-mlp")
    if mlp is None and mixer is not None and mixer_in is not None:
        # an encoder's attention wrapper that norms its own input before the self-attention reads it (pre-norm
        # encoders: the norm sits inside the mixer module, so no candidate above sees it)
        for module in mixer.modules():
            x, _ = seen.get(id(module), (None, None))
            if module is not mixer and x is not None and _same(x, mixer_in) and _is_norm(module, x):
                found.add("pre-mixer")
    return found


def _feeds(seen: dict, norm: Any, y: Any, candidates: list) -> bool:
    """``y``, the norm's output, is what another module of the block that is no norm is called with."""
    return any(m is not norm and _same(x, y) and not _is_norm(m, x) for m in candidates
               for x, _ in [seen.get(id(m), (None, None))] if x is not None)


def block_placement(found: list[set[str]]) -> str | None:
    """"sandwich norms" where a sublayer is normed before and on its output, "post-norm" where sublayer outputs are
    normed and no input is, "norm after each add" where the stream itself is normed after the sublayers' adds and
    no input is, "pre-norm" where only inputs are, else None (no norm next to a sublayer)."""
    for sub in ("mixer", "mlp"):
        if any({f"pre-{sub}", f"post-{sub}"} <= f for f in found):
            return "sandwich norms"
    if any(f & {"post-mixer", "post-mlp"} for f in found):
        return "post-norm"
    if any("after-add" in f for f in found) and not any(f & {"pre-mixer", "pre-mlp"} for f in found):
        return "norm after each add"
    return "pre-norm" if any(found) else None


def norms_of(module: Any, seen: dict[int, list]) -> list:
    """The norms among ``module``'s leaf modules that ran in the recorded forward: measured (:func:`_is_norm`), not
    picked by their class's name."""
    return [m for m in module.modules() if next(m.children(), None) is None and id(m) in seen
            and seen[id(m)][0] is not None and _is_norm(m, seen[id(m)][0])]


def norm_form(module: Any, x: Any) -> str:
    """"LayerNorm" where the norm centres its input (its output does not move when a constant is added to every
    feature), else "RMSNorm" (it divides by the root mean square alone: Llama's, T5's "LayerNorm", Llama 4's L2Norm)."""
    import torch

    with torch.no_grad():
        shift = 3 * float(x.abs().max()) + 1.0
        low, high = _out(module(x)), _out(module(x + shift))
    scale = max(float(low.abs().max()), 1e-30)
    # a centred norm recomputes the same mean-free input up to rounding of the shifted values (shift × 2^-23 per
    # feature, divided by a standard deviation of the input's order); an RMS norm moves by order one
    return "LayerNorm" if torch.allclose(low, high, rtol=0, atol=1e-3 * scale) else "RMSNorm"


def has_qk_norms(attention: Any, seen: dict[int, list], widths: set[int]) -> bool:
    """A norm inside ``attention`` over a head's width or all heads' (``widths``) whose output goes on into the scores:
    no module of the attention reads it (BitNet's attn_sub_norm feeds o_proj) and it is not what the attention returns
    (BERT's output LayerNorm, over the stream). Measured whatever the norm is called: q_norm, q_layernorm,
    query_layernorm, before or after the rotary."""
    inside = [m for m in attention.modules() if m is not attention and id(m) in seen and seen[id(m)][0] is not None]
    returned = seen.get(id(attention), [None, None])[1]

    def read(norm: Any) -> bool:
        y = seen[id(norm)][1]
        return any(m is not norm and x.numel() == y.numel() and _same(x.reshape(-1), y.reshape(-1)) for m in inside
                   for x in [seen[id(m)][0]])

    return any(seen[id(n)][0].shape[-1] in widths and not _same(seen[id(n)][1], returned) and not read(n)
               for n in norms_of(attention, seen))
