"""The dense MLP (gated or not) and the same MLP called on a mixture's token-flattened rows (a shared expert)."""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import Neurons, Residual
from ...core.locators import child, own
from ...core.relations import first, relation, rows
from ...core.values import Value
from ...core.views import TOKENS
from ...research.weights import MLP as MLP_WEIGHTS


@relation("mlp_output == down_proj(mlp_neurons)", proves="mlp_neurons mlp_output", reads="mlp_neurons mlp_output")
def _down(host, r):
    return [(host.down_proj._module(r["mlp_neurons"]), r["mlp_output"])]


def _native(host, name: str):
    """The host's child ``name`` (a standard name; aliases resolve) as the forward calls it: the module itself."""
    found = getattr(host, name)
    return getattr(found, "_module", found)


@relation("mlp_activation == act_fn(gate_proj(input)); mlp_neurons == mlp_activation · up_proj(input)",
          proves="mlp_activation", reads="input mlp_activation mlp_neurons")
def _gated(host, r):
    x = rows(first(r["input"]))  # by the standard names: a family's own (mT5's wi_0, wi_1, act) mounted on them
    activation = _native(host, "act_fn")(_native(host, "gate_proj")(x))
    return [(activation, rows(r["mlp_activation"])), (activation * _native(host, "up_proj")(x), rows(r["mlp_neurons"]))]


MLP_RELATIONS = (_down, _gated)


_MLP_VALUES = [
    Value("mlp_activation", Neurons, "The activation function's output", child("act_fn")),
    Value("mlp_neurons", Neurons,
          "What the down projection receives: act(gate)·up on a gated MLP, the activation itself otherwise",
          child("down_proj", "input")),
    Value("mlp_output", Residual, "What the MLP adds to the residual stream", own("output")),
]

MLP = host("MLP", values=_MLP_VALUES, HOST="model.layers[i].mlp", KIND="dense MLP", RELATIONS=MLP_RELATIONS,
           **MLP_WEIGHTS)

#: an MLP called on the mixture's token-flattened [batch*seq, hidden] rows (a shared expert)
TokenMLP = host("TokenMLP", values=[
    Value(v.name, v.layout, v.description, v.locator, view=TOKENS) for v in _MLP_VALUES
], HOST="model.layers[i].mlp.shared_experts", KIND="shared expert MLP", RELATIONS=MLP_RELATIONS,
                **MLP_WEIGHTS)
