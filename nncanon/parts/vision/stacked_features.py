"""A batched tower read at several hidden states, side by side, through a normed MLP projector (VipLLaVA's).

Where LLaVA's projector reads one hidden state of its CLIP tower, VipLLaVA's reads several: the wrapper takes
``hidden_states[j]`` for every ``j`` of the config's ``vision_feature_layer`` list (in the list's order, negative
from the end: hidden_states[0] is the stream entering the first block, hidden_states[j] the stream leaving block
j - 1), drops each one's class-token row and concatenates them along the width (``tower_output``, ``[images,
patches, layers · vision_hidden_size]``, the layout `StackedFeatures`: ``stacked_width`` is that product). The
projector norms that row with a LayerNorm (``norm``) before its two linears (``linear_fc1``, ``act_fn``,
``down_proj``), one image token per patch; the scatter is handed them per image, ``[images, patches, hidden]``,
served flat (`vision_line.FLAT`).

`STACKED_FEATURES` proves ``tower_output`` from the tower's blocks and as what the projector is called with;
`NORMED_PROJECTOR` proves ``image_features`` from it. The rest of the tower (its embeddings, pre_layrnorm, blocks)
is CLIP's, proven by `vision_towers`.
"""

from __future__ import annotations

from typing import Any

from ...core.hosts import host
from ...core.layouts import layout
from ...core.precision import SUBBLOCK
from ...core.relations import first, relation
from ...core.values import Value
from .vision_line import FLAT, MASK, SCATTER, AtRoot, image_features_value
from .vision_towers import _embeddings, _stack, clip_tower

#: the row the projector reads per patch: each selected hidden state's row, side by side
StackedFeatures = layout("StackedFeatures", "images features stacked_width")


def feature_layers(model: Any) -> list[int]:
    """The hidden states the wrapper reads, each 0 ... num_layers (the config's vision_feature_layer list, in its
    order; one int is a list of one)."""
    config = model._module.config
    layers = config.vision_feature_layer
    layers = [layers] if isinstance(layers, int) else list(layers)
    return [layer % (config.vision_config.num_hidden_layers + 1) for layer in layers]


@relation("tower_output == the hidden states at vision_feature_layer (each j: 0 is layers[0].layer_input, j "
          "layers[j-1].layer_output), in the list's order, each's class-token row dropped, side by side along the "
          "width; it is what the projector is called with", proves="tower_output",
          reads="layers[*].layer_input layers[*].layer_output tower_output model.projector.input")
def STACKED_FEATURES(host, r):
    import torch

    outs = r["layers[*].layer_output"]
    hidden = [r["layers[*].layer_input"][0] if j == 0 else first(outs[j - 1])
              for j in feature_layers(host._std_model)]
    stacked = torch.cat([state[:, 1:] for state in hidden], dim=-1)
    return [(stacked, r["tower_output"]), (first(r["model.projector.input"]), r["tower_output"])]


@relation("image_features == projector(tower_output) = down_proj(act_fn(linear_fc1(norm(tower_output)))), norm a "
          "LayerNorm over the stacked row; one image token per row, the images' rows one after another",
          proves="image_features", reads="tower_output image_features", tolerance=SUBBLOCK)
def NORMED_PROJECTOR(host, r):
    """Recomputed in float64 (the norm, both linears and the activation): SUBBLOCK."""
    import torch.nn.functional as F

    projector = host._std_model.projector
    norm, fc1, fc2 = projector.norm._module, projector.linear_fc1._module, projector.down_proj._module
    double = lambda t: None if t is None else t.double()  # noqa: E731
    x = F.layer_norm(r["tower_output"].double(), norm.normalized_shape, double(norm.weight), double(norm.bias),
                     norm.eps)
    x = projector.act_fn._module(F.linear(x, fc1.weight.double(), double(fc1.bias)))
    out = F.linear(x, fc2.weight.double(), double(fc2.bias))
    return [(out.reshape(-1, out.shape[-1]), r["image_features"])]


def stacked_tower(name: str, projector: str = "model.multi_modal_projector") -> type:
    """``model.vision`` of a wrapper whose CLIP tower's hidden states at vision_feature_layer (a list) its
    ``projector`` (native path) reads side by side through a LayerNorm and two linears."""
    features = Value("tower_output", StackedFeatures,
                     "The tower's output the projector reads: the hidden states at vision_feature_layer, each's "
                     "class token dropped, side by side along the width",
                     AtRoot(io="input", module=projector, shown="model.projector", element=0,
                            words="the projector's input, at the root"))
    relations = (MASK, SCATTER, _embeddings, _stack, STACKED_FEATURES, NORMED_PROJECTOR)
    tower = host(name, clip_tower(f"{name}Base", projector), values=[features, image_features_value(view=FLAT)],
                 HOST="model.vision", RELATIONS=relations)
    return type(name, (_StackedSizes, tower), {"HOST": "model.vision", "RELATIONS": relations})


class _StackedSizes:
    @property
    def stacked_width(self) -> int:
        """The projector's row: the tower's width once per index of vision_feature_layer."""
        return len(feature_layers(self._std_model)) * self.vision_hidden_size


__all__ = ["StackedFeatures", "feature_layers", "STACKED_FEATURES", "NORMED_PROJECTOR", "stacked_tower"]
