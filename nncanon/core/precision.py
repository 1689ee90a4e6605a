"""The float32 error model behind every relation's tolerance.

A relation recomputes a value by the module's own math, usually in another order than the forward (a
different kernel, a token at a time, float64). Each evaluation of a chain of n float32 roundings lies within
gamma_n = n u / (1 - n u) of the exact result relative to the terms' magnitude (Higham, *Accuracy and Stability
of Numerical Algorithms*, 2nd ed., section 3.1; u = 2**-24), so two lie within 2 gamma_n of each other
(:func:`reordered`). A relation's error is measured relative to the read side's scale, at least 1
(`nncanon.core.relations.error`), so its tolerance is 2 gamma_n for the longest chain it recomputes. The three
levels below are those chains on the tiny checkpoints the build proves on (hidden 40-80, MLP width <= 96, head
dim <= 32, prompts <= 16 tokens, DeltaNet chunks of 64 tokens over key dim <= 18), rounded up;
tests/test_precision.py checks each covers its chain.
"""

from __future__ import annotations

U32 = 2.0 ** -24  # float32's unit roundoff


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
