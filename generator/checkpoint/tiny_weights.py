"""The tiny checkpoint's weights as a pure function of the recipe, the same bits on every CPU.

torch's own init cannot be pinned: its CPU ``normal_``, ``uniform_`` over an inexact range, and
``log``/``exp`` give different bits under different ``ATEN_CPU_CAPABILITY`` (default, avx2,
avx512), so a pin made on one machine failed on another. Here every parameter is drawn from
SHAKE-256 of (seed, parameter name): integers, combined and scaled with IEEE basic operations
only (integer sums, one multiply by a correctly rounded constant, one cast to float32), which
every conforming CPU computes identically. A parameter's draw depends on its name, not on its
position, so adding a parameter elsewhere leaves the others as they were.

The draws keep the shape of the model's init, so no activation saturates:

- a matrix (or a stack of expert matrices, a convolution kernel) is centred with standard
  deviation ``1/sqrt(fan_in)``: the input size of the map it is used in;
- a vector the init leaves constant (norm gains, biases, ``dt_bias``) keeps that constant plus a
  spread of :data:`CONSTANT_PARAM_NOISE`, so an identity such as "the gain is 1 + weight" cannot hold
  by accident of a zero weight;
- a vector the init draws at random follows its own rule in :data:`VECTOR_RULES` (DeltaNet's
  ``A_log`` in the range transformers draws it from). A random vector without a rule is an error:
  its range is the model's business, not a guess.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import numpy as np

CONSTANT_PARAM_NOISE = 0.1

# Irwin-Hall of four 16-bit uniforms: mean 2 * 65535, variance 4 * (65536**2 - 1) / 12; bounded at
# +-3.46 standard deviations, so no draw is an outlier.
_TERMS, _LEVELS = 4, 1 << 16
_UNIT = 1.0 / math.sqrt(_TERMS * (_LEVELS * _LEVELS - 1) / 12.0)

#: name pattern -> (low, high) of a uniform draw, for vectors the model's init draws at random.
#: DeltaNet's A_log: transformers draws log(uniform(0, 16)); most of that mass lies in [0, log 16].
#: gpt-oss's attention sinks (one logit per head, init normal(0, 0.02)): drawn in [-1, 2], the range of
#: the tiny model's attention scores, so the sink takes a visible share of each query's probability
#: without swamping the keys (a sink of ~0 would make "the sink's mass" check nothing but 1 / (keys + 1)).
#: Mamba-2's dt_bias (softplus(dt_bias) is each head's time step; the init draws it so that the step is
#: in [0.001, 0.1]): drawn in [-3, 0], a step of about 0.05 to 0.7, so a 20-token prompt moves the
#: state visibly (at the init's steps its decay would hardly show in so few tokens).
#: gpt-oss's router bias (init normal(0, 0.02)): a small spread around zero, as the init gives, so
#: the logits stay the stream's and the bias still shifts them.
#: RecurrentGemma's RG-LRU recurrent_param Λ (log a = -8 · r · softplus(Λ); the init draws Λ in about [-6.9,
#: -2.2], a decay per token of at most ~0.84 in log): drawn in [-4, -1], softplus 0.02 to 0.31, so the state
#: decays visibly over a 20-token prompt without vanishing in a few tokens.
VECTOR_RULES: dict[str, tuple[float, float]] = {
    r"(^|\.)rg_lru\.recurrent_param$": (-4.0, -1.0),
    r"(^|\.)A_log$": (0.0, 2.75),
    r"(^|\.)self_attn\.sinks$": (-1.0, 2.0),
    r"(^|\.)mlp\.router\.bias$": (-0.1, 0.1),
    r"(^|\.)mixer\.dt_bias$": (-3.0, 0.0),
    # OLMo Hybrid's DeltaNet dt_bias (drawn as Mamba-2's, softplus of it each head's time step; Qwen's is ones at
    # init, a constant, so this rule leaves it alone): as Mamba-2's, so the decay shows over a short prompt
    r"(^|\.)linear_attn\.dt_bias$": (-3.0, 0.0),
    r"(^|\.)(mixer|mamba)\.dt_proj\.bias$": (-3.0, 0.0),  # Mamba-1's dt bias (Jamba's mixer: mamba): as Mamba-2's
    # CLIP's class token (init normal(0, hidden_size ** -0.5)): about +-1.5 of those deviations on the tiny tower
    r"(^|\.)embeddings\.class_embedding$": (-0.2, 0.2),
    # Llama 3.2 Vision's class token (init as CLIP's; its tanh gates, zeros at init, get the constant's noise)
    r"(^|\.)vision_model\.class_embedding$": (-0.2, 0.2),
    # SigLIP's MLP biases (init normal(0, 1e-6), learned on every checkpoint): a spread like the other biases', so a
    # relation that left them out would fail
    r"(^|\.)mlp\.fc[12]\.bias$": (-0.1, 0.1),
    # LLaVA-NeXT's image_newline (init normal(0, hidden_size ** -0.5)): about +-2 of those deviations on the tiny text
    r"(^|\.)image_newline$": (-0.25, 0.25),
    # DiffLlama's differential-attention lambdas (init normal(0, lambda_std_dev = 0.1)): about +-3 of those
    # deviations, so exp(lambda_q1 · lambda_k1) - exp(lambda_q2 · lambda_k2) moves lambda off lambda_init visibly
    r"(^|\.)self_attn\.lambda_[qk][12]$": (-0.3, 0.3),
}


#: buffers the recipe draws too (every other buffer keeps what the model's init gives): DeepSeek-V3's
#: e_score_correction_bias, zeros at init and learned on every released checkpoint, is added to the
#: router's sigmoid scores (of spread ~0.1 on the tiny model) before the grouped top-k; drawn in
#: [-0.1, 0.1] it moves some choices, so a relation that left it out would fail. LFM2-MoE's expert_bias is
#: the same kind of buffer (added to the sigmoid scores before the top-k) and drawn alike. Gemma 4's layer_scalar
#: (ones at init, learned on the released checkpoints) multiplies a block's output: drawn in [0.5, 1.5], so a
#: relation that left it out would fail.
BUFFER_RULES: dict[str, tuple[float, float]] = {
    r"(^|\.)e_score_correction_bias$": (-0.1, 0.1),
    r"(^|\.)feed_forward\.expert_bias$": (-0.1, 0.1),
    r"(^|\.)layers\.\d+\.layer_scalar$": (0.5, 1.5),
}


#: parameters the model fixes at init and never trains (requires_grad off), kept as the init gives them: Whisper's
#: sinusoidal source positions, which the page proves equal to the formula
FIXED_PARAMETERS = (r"(^|\.)encoder\.embed_positions\.weight$",)


class InitRuleMissing(ValueError):
    """A parameter whose init is random but has no rule here (see :data:`VECTOR_RULES`)."""


def _stream(seed: int, name: str, nbytes: int) -> bytes:
    return hashlib.shake_256(f"nncanon-tiny/{seed}/{name}".encode()).digest(nbytes)


def standard(seed: int, name: str, count: int) -> np.ndarray:
    """``count`` float64 draws with mean 0 and standard deviation 1, identical on every CPU."""
    words = np.frombuffer(_stream(seed, name, 2 * _TERMS * count), dtype="<u2")
    sums = words.reshape(count, _TERMS).astype(np.int64).sum(axis=1) - _TERMS * (_LEVELS - 1) // 2
    return sums.astype(np.float64) * _UNIT


def uniform(seed: int, name: str, count: int, low: float, high: float) -> np.ndarray:
    """``count`` float64 draws uniform in [low, high), identical on every CPU."""
    words = np.frombuffer(_stream(seed, name, 4 * count), dtype="<u4").astype(np.float64)
    return low + (high - low) * (words * (1.0 / 4294967296.0))


def fan_in(param: Any, owner: Any) -> int:
    """The input size of the map a weight is used in: a convolution's ``in/groups x kernel``,
    GPT-2's Conv1D's first dimension (stored ``[in, out]``), transposed fused experts' next-to-last
    (``[experts, in, out]``), else the last dimension (Linear,
    Embedding and stacked experts are stored ``[..., out, in]``)."""
    import torch

    shape = tuple(param.shape)
    if isinstance(owner, torch.nn.modules.conv._ConvNd):
        return math.prod(shape[1:])
    if type(owner).__name__ == "Conv1D":
        return shape[0]
    if getattr(owner, "is_transposed", False):  # fused experts stored [experts, in, out] (gpt-oss)
        return shape[-2]
    return shape[-1]


def draw(seed: int, name: str, param: Any, owner: Any) -> np.ndarray:
    """The float32 values of one parameter (its shape), from the seed, its name and its init."""
    count = param.numel()
    flat = param.detach().reshape(-1)
    if param.dim() >= 2:
        values = standard(seed, name, count) * (1.0 / math.sqrt(fan_in(param, owner)))
    elif count > 0 and bool((flat == flat[0]).all()):
        values = float(flat[0]) + standard(seed, name, count) * CONSTANT_PARAM_NOISE
    else:
        rule = next((bounds for pattern, bounds in VECTOR_RULES.items() if re.search(pattern, name)), None)
        if rule is None:
            raise InitRuleMissing(
                f"parameter {name} {list(param.shape)} is drawn at random by the model's init and has "
                "no rule in generator/checkpoint/tiny_weights.py VECTOR_RULES; add its range there"
            )
        values = uniform(seed, name, count, *rule)
    return values.astype(np.float32).reshape(tuple(param.shape))


def fill(model: Any, seed: int) -> None:
    """Overwrite every parameter of ``model`` with its portable draw (tied ones once) but a frozen table the model
    computes itself, and the buffers :data:`BUFFER_RULES` names."""
    import torch

    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, param in model.named_parameters():
            owner = modules[name.rpartition(".")[0]]
            if not param.requires_grad and (any(re.search(pattern, name) for pattern in FIXED_PARAMETERS)
                                            or hasattr(owner, "create_weight")):
                continue  # a fixed table the model computes (Whisper's, Marian's, Pegasus's sinusoid): kept as its init gives it
            param.copy_(torch.from_numpy(draw(seed, name, param, owner)))
        for name, buffer in model.named_buffers():
            rule = next((bounds for pattern, bounds in BUFFER_RULES.items() if re.search(pattern, name)), None)
            if rule is not None:
                values = uniform(seed, name, buffer.numel(), *rule).astype(np.float32)
                buffer.copy_(torch.from_numpy(values.reshape(tuple(buffer.shape))))
