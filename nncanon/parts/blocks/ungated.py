"""The MLP with no gate: ``down(act(up(x)))``, so ``mlp_neurons`` is the activation itself.

GPT-NeoX's ``dense_h_to_4h``, GPT-J's and CodeGen's ``fc_in``, Phi's ``fc1``, BLOOM's and Falcon's
``dense_h_to_4h``: each family names its up projection; the down projection and the activation are
mounted as ``down_proj`` and ``act_fn`` (RENAME).
"""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import Residual
from ...core.locators import child
from ...core.relations import first, pick, relation, rows
from ...core.values import Value
from .mlp import MLP, MLP_RELATIONS


def ungated_mlp(up: str):
    """The MLP host whose up projection is the child ``up`` (its native name)."""
    @relation(f"mlp_activation == act_fn({up}(input)); mlp_neurons == mlp_activation (no gate)",
              proves="mlp_activation", reads="input mlp_activation mlp_neurons")
    def _up(host, r):
        x = rows(first(r["input"]))
        activation = host.act_fn._module(getattr(host, up)._module(x))
        return [(activation, rows(r["mlp_activation"])), (rows(r["mlp_activation"]), rows(r["mlp_neurons"]))]

    return host("UngatedMLP", MLP, RELATIONS=(pick(MLP_RELATIONS, "mlp_output == down_proj"), _up))


def residual_adding_mlp(up: str, down: str):
    """The MLP host of a module that returns its output already added to ``layer_mid`` (BLOOM's, MPT's): what it
    adds, ``mlp_output``, is read at the down projection (``down``, its native name, mounted as ``down_proj``), so
    the block's ``layer_mid + mlp_output == layer_output`` holds as on every other family."""
    return host("ResidualAddingMLP", ungated_mlp(up), values=[
        Value("mlp_output", Residual,
              f"What the MLP adds to the residual stream: {down}'s output (the module returns it added to layer_mid)",
              child("down_proj")),
    ])


def n_inner_sizes(model) -> dict[str, int]:
    """``dim_sizes`` of a GPT-2-style config: the MLP is ``n_inner`` wide, or 4 · hidden_size when it is None."""
    config = model.text_config
    return {"intermediate_size": config.n_inner or 4 * config.hidden_size}
