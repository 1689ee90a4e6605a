"""xIELU (Huang & Schlag 2024): an activation with two learnable coefficients per MLP, in an ungated MLP.

    xielu(x) = alpha_p · x² + beta · x                                  x > 0
             = alpha_n · (expm1(min(x, eps)) - x) + beta · x            x <= 0
    alpha_p = softplus(act_fn.alpha_p),  alpha_n = beta + softplus(act_fn.alpha_n)

Apertus's ``ApertusMLP`` is ``down_proj(xielu(up_proj(x)))``: no gate, and every block's ``act_fn`` is a module
with its own parameters (``alpha_p``, ``alpha_n``) and buffers (``beta``, ``eps``), so the activation is not a
fixed function a reader can assume. The relation recomputes it from that block's coefficients, in float64, by
the formula above (not by calling the module), so an activation that is not xIELU, or coefficients read from
another block, fail it.
"""

from __future__ import annotations

from typing import Any

from ...core.hosts import host
from ...core.relations import first, pick, relation, rows
from .mlp import MLP, MLP_RELATIONS


def xielu(act: Any, x: Any) -> Any:
    """xIELU of ``x`` with the coefficients of the module ``act`` (``XIELUActivation``), in float64."""
    import torch

    x = x.double()
    softplus = torch.nn.functional.softplus
    beta, eps = act.beta.double(), act.eps.double()
    alpha_p = softplus(act.alpha_p.double())
    alpha_n = beta + softplus(act.alpha_n.double())
    return torch.where(x > 0, alpha_p * x * x + beta * x, (torch.expm1(torch.minimum(x, eps)) - x) * alpha_n + beta * x)


def xielu_mlp(up: str):
    """The ungated MLP host whose up projection is the child ``up`` and whose activation is xIELU."""

    # up(input) is the module's own float32 projection, as the forward computes it; the activation is
    # recomputed in float64: a few roundings (the square, expm1, two products, a sum) at the activation's scale,
    # within STEP
    @relation(f"mlp_activation == xielu({up}(input)), xielu(x) = softplus(alpha_p) · x² + beta · x for x > 0, "
              "(beta + softplus(alpha_n)) · (expm1(min(x, eps)) - x) + beta · x otherwise, with act_fn's own "
              "alpha_p, alpha_n, beta, eps; mlp_neurons == mlp_activation (no gate)",
              proves="mlp_activation", reads="input mlp_activation mlp_neurons")
    def _up(host, r):
        x = rows(first(r["input"]))
        activation = xielu(host.act_fn._module, getattr(host, up)._module(x))
        return [(activation, rows(r["mlp_activation"])), (rows(r["mlp_activation"]), rows(r["mlp_neurons"]))]

    return host("XIELUMLP", MLP, RELATIONS=(pick(MLP_RELATIONS, "mlp_output == down_proj"), _up))
