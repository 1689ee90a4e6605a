"""The dense MLP (gated or not), the same MLP called on a mixture's token-flattened rows (a shared expert), and the
gated MLP whose gate and up projections are the two halves of one fused projection (Phi-3's gate_up_proj, ModernBERT's
Wi mounted under that name)."""

from __future__ import annotations

from ...core.hosts import host
from ...core.layouts import Neurons, Residual
from ...core.locators import child, own
from ...core.relations import first, pick, relation, rows
from ...core.values import Value
from ...core.views import TOKENS
from ...research.weights import MLP as MLP_WEIGHTS
from ...research.weights import Layout, Projection


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


# -- the fused gated MLP: gate and up are the two halves of gate_up_proj ------------------------------------------


@relation("gate, up == gate_up_proj(input).chunk(2, -1); mlp_activation == activation_fn(gate); "
          "mlp_neurons == up · mlp_activation", proves="mlp_activation", reads="input mlp_activation mlp_neurons")
def _fused_gated(host, r):
    """The modules through their standard names: a family mounts its fused projection and activation there (RENAME)."""
    x = rows(first(r["input"]))
    gate, up = host.gate_up_proj._module(x).chunk(2, dim=-1)
    activation = host.activation_fn._module(gate)
    return [(activation, rows(r["mlp_activation"])), (up * activation, rows(r["mlp_neurons"]))]


#: W_gate and W_in are the two halves of gate_up_proj's outputs, gate first (as the forward chunks them)
_HALVES = Layout(w_gate=Projection("gate_up_proj", lambda h, t: t.chunk(2, -1)[0], heads=False),
                 w_in=Projection("gate_up_proj", lambda h, t: t.chunk(2, -1)[1], heads=False))

#: the gated MLP with one fused gate/up projection, the activated half first
FusedGatedMLP = host("FusedGatedMLP", MLP, WEIGHTS=_HALVES, values=[
    Value("mlp_activation", Neurons, "The activation function's output: activation_fn of gate_up_proj's gate half",
          child("activation_fn")),
    Value("mlp_neurons", Neurons,
          "What the down projection receives: gate_up_proj's up half times the activated gate half",
          child("down_proj", "input")),
], RELATIONS=(pick(MLP_RELATIONS, "mlp_output == down_proj"), _fused_gated))
