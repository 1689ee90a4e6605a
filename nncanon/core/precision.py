"""The error model behind every relation's tolerance, in float32 and in the half-precision dtypes researchers load.

A relation recomputes a value by the module's own math, usually in another order than the forward (a
different kernel, a token at a time, float64). Each evaluation of a chain of n float32 roundings lies within
gamma_n = n u / (1 - n u) of the exact result relative to the terms' magnitude (Higham, *Accuracy and Stability
of Numerical Algorithms*, 2nd ed., section 3.1; u = 2**-24), so two lie within 2 gamma_n of each other
(:func:`reordered`). A relation's error is measured relative to the read side's scale, at least 1
(`nncanon.core.relations.error`), so its tolerance is 2 gamma_n for the longest chain it recomputes. The three
levels below are those chains on the tiny checkpoints the build proves on (hidden 40-80, MLP width <= 96, head
dim <= 32, prompts <= 16 tokens, DeltaNet chunks of 64 tokens over key dim <= 18), rounded up;
tests/test_precision.py checks each covers its chain.

A bfloat16 or float16 load (:func:`bound`) rounds differently: torch's CPU kernels accumulate a half dtype in
float32 (its ``opmath`` type: a matmul's, a reduction's, a softmax's running terms) and round to the dtype where an
op stores its output. A chain of n roundings of which k store a tensor lies within gamma_n(2**-24) + gamma_k(u) of
the exact result (u = 2**-8 for bfloat16, 2**-11 for float16), so two evaluations within twice that. Each level
names the stores its chain makes (:data:`STORED`); a chain whose stores make gamma meaningless (k u >= 1) has no
bound at that dtype, and the relation cannot be said to hold there.
"""

from __future__ import annotations

U32 = 2.0 ** -24  # float32's unit roundoff
#: each dtype's unit roundoff: half its machine epsilon (float32's 24-bit significand, bfloat16's 8, float16's 11)
UNIT_ROUNDOFF = {"float32": U32, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def gamma(n: int, u: float = U32) -> float:
    """The relative error bound of n chained roundings."""
    if n * u >= 1:
        raise ValueError(f"{n} roundings: the bound is meaningless past 1/u")
    return n * u / (1 - n * u)


def reordered(n: int, scale: float = 1.0) -> float:
    """The largest difference between two float32 evaluations of a chain of n roundings at ``scale``."""
    return 2 * gamma(n) * scale


#: one step recomputed: a norm, a projection or a router over the hidden size (<= 80 roundings)
STEP_ROUNDINGS = 80
STEP = 1e-5
#: a sub-block recomputed: a norm, the projections, scores over head dim, a softmax and a weighted sum over the
#: prompt, the output projection, an MLP, chained (<= 800 roundings)
SUBBLOCK_ROUNDINGS = 800
SUBBLOCK = 1e-4
#: a recurrence recomputed token by token against a chunked kernel: the projections, the conv window, the
#: chunk's triangular solve (64 tokens x key dim 18), the state carried across chunks, the gated norm and the
#: out projection (<= 8,000 roundings, the widest tiny DeltaNet and Mamba-2 blocks with their inputs' chain)
RECURRENCE_ROUNDINGS = 8000
RECURRENCE = 1e-3

LEVELS = {"STEP": (STEP, STEP_ROUNDINGS), "SUBBLOCK": (SUBBLOCK, SUBBLOCK_ROUNDINGS),
          "RECURRENCE": (RECURRENCE, RECURRENCE_ROUNDINGS)}

#: the stores to the model's dtype each level's chain makes (every other rounding is a float32 accumulation):
#: STEP, a norm (its float32 result cast back, then times its weight) or a projection (its output, its bias add)
#: or a router (the logits, the softmax's cast, the weights' renormalisation): <= 4;
#: SUBBLOCK, a norm (2), the projections (2), the rotary (q·cos, rotate_half(q)·sin, their sum: 3), the scores, their
#: scaling, the mask's add, the softmax's cast, the weighted sum, the output projection (6), the residual add, the
#: MLP's gate, activation, up, product and down (6): <= 20 (the widest sub-block a relation recomputes);
#: RECURRENCE, a state carried token by token in the model's dtype stores it once per token and op: 3 ops (decay,
#: the input's outer product, their sum) on each of the <= 16 prompt tokens, with SUBBLOCK's chain around it: <= 68
STORED = {"STEP": 4, "SUBBLOCK": 20, "RECURRENCE": 68}


def level_of(tolerance: float) -> str:
    """The level a relation's float32 tolerance is (every relation's is one: tests/test_precision.py)."""
    found = next((name for name, (level, _) in LEVELS.items() if level == tolerance), None)
    if found is None:
        raise ValueError(f"tolerance {tolerance:g} is not a level of the error model ({', '.join(LEVELS)}); "
                         f"give the relation one of nncanon.core.precision's levels")
    return found


def bound(tolerance: float, dtype: str) -> float | None:
    """A relation's bound at ``dtype`` ("float32", "bfloat16", "float16") for its float32 ``tolerance``: the
    tolerance itself in float32, else twice gamma_n(float32) + gamma_k(u) of its level's chain (module
    docstring). None: the chain's stores leave no meaningful bound at that dtype."""
    if dtype == "float32":
        return tolerance
    level = level_of(tolerance)
    roundings, stored, u = LEVELS[level][1], STORED[level], UNIT_ROUNDOFF[dtype]
    if stored * u >= 1:
        return None
    return 2 * (gamma(roundings) + gamma(stored, u))


def forward_bound(blocks: int, dtype: str, level: str = "SUBBLOCK") -> float | None:
    """The largest difference, relative to the output's scale, between two evaluations at ``dtype`` of a forward
    through ``blocks`` blocks and the head that differ in the order of their float32 accumulations (one input's
    layout). In float32 a reordered kernel's difference only propagates; in a half dtype a difference of one float32
    ulp can flip the next store's rounding, and that store's half-ulp difference flips the next: every store
    downstream contributes its own gamma. So each evaluation lies within gamma_n(2**-24) + gamma_k(u) of the exact
    forward, n and k its chain's float32 roundings and stores: a block is the chain of ``level`` (the widest its
    relations recompute: a sub-block, or a recurrence around one) and STEP's (its second norm and residual add),
    the head is STEP's (the final norm, the head). None: the stores leave no meaningful bound at ``dtype``."""
    roundings = (LEVELS[level][1] + STEP_ROUNDINGS) * blocks + STEP_ROUNDINGS
    stored, u = (STORED[level] + STORED["STEP"]) * blocks + STORED["STEP"], UNIT_ROUNDOFF[dtype]
    if stored * u >= 1:
        return None
    return 2 * (gamma(roundings) + gamma(stored, u))
