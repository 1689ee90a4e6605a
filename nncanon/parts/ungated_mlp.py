"""The MLP with no gate: one up projection, an activation, the down projection (GPT-2's and StarCoder2's
c_fc -> act -> c_proj, GPT-NeoX's dense_h_to_4h -> act -> dense_4h_to_h, OPT's and Phi's fc1 -> act -> fc2).

The shared MLP host (nncanon.parts.mlp.MLP) reads ``act_fn`` and ``down_proj`` by their standard
names, which a family's RENAME maps its own onto; its gated relation does not hold here, so the host
below states the ungated one over the family's up projection, named as the module has it.
"""

from __future__ import annotations

from ..hosts import host
from ..relations import first, pick, relation, rows
from .mlp import MLP, MLP_RELATIONS


def ungated_relation(up: str):
    """``mlp_activation == act_fn(<up>(input))`` and ``mlp_neurons == mlp_activation``: nothing multiplies the
    activation before the down projection."""

    @relation(f"mlp_activation == act_fn({up}(input)); mlp_neurons == mlp_activation (not gated)",
              proves="mlp_activation", reads="input mlp_activation mlp_neurons")
    def ungated(host, r):
        x = rows(first(r["input"]))
        activation = host.act_fn._module(getattr(host._module, up)(x))
        return [(activation, rows(r["mlp_activation"])), (rows(r["mlp_activation"]), rows(r["mlp_neurons"]))]

    return ungated


def ungated_mlp(up: str):
    """The shared MLP host with ``down_proj``'s relation and the ungated one over ``up``."""
    return host("UngatedMLP", MLP, RELATIONS=(pick(MLP_RELATIONS, "mlp_output == down_proj"),
                                                     ungated_relation(up)))
