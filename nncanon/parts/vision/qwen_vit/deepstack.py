"""DeepStack (Qwen3-VL, Qwen3-VL-MoE): vision features added to the first text blocks' output.

After each vision block listed in ``vision_config.deepstack_visual_indexes``, a merger of its own
(``deepstack_merger_list[j]`` -> ``deepstack_projectors[j]``) maps the stream to the text width,
and the text model adds the result to the image tokens of the stream leaving text block j, by
calling ``_deepstack_process(hidden_states, visual_pos_masks, features)`` right after the block
returns. `install_deepstack` serves that call's arguments at
``model.layers[j].deepstack_output`` (`DeepStackBlock`), for j below
``len(deepstack_visual_indexes)``. `DeepStackVision` states what it means (its relations read it on
the text blocks that get it, `DeepStackVision.deepstack_layers`, as only ``model.vision``'s load,
with images, serves it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....core.hosts import host
from ....core.layouts import ImageFeatures
from ....core.locators import Tap
from ....core.values import Condition, Unavailable, Value
from ...blocks.decoder import Block
from . import relations
from .hosts import PositionedVision

#: Qwen3-VL's DeepStack mergers, mounted at the root beside the projector
DEEPSTACK_MOUNTS = {"model.visual.deepstack_merger_list": "deepstack_projectors"}

#: what a DeepStack line must resolve with the image-text-to-text task
DEEPSTACK_PATHS = ["vision.pos_embed", "deepstack_projectors"]

#: where DeepStack's addition is served: the text model passes block i's output and the features
#: through ``_deepstack_process`` right after the block returns (`install_deepstack` serves it)
DEEPSTACK = "deepstack"


@dataclass(frozen=True)
class AfterBlock(Tap):
    """A point of the text model's forward right after block i returns, served by this library."""

    def read_at(self) -> str:
        what = "the arguments of" if self.io == "input" else "the output of"
        return f"after the block, inside the text model's forward: {what} {self.described}{self.part()}"


WITH_IMAGES = Condition(
    needs='task="image-text-to-text" and images in the prompt',
    why="DeepStack's features come from the vision encoder",
    holds=lambda model: model.task == "image-text-to-text",
)


def deepstack_blocks(model: Any) -> int:
    """How many text blocks (the first ones) receive DeepStack features: one per deepstack_visual_indexes."""
    return len(relations.taps(model))


class _DeepStackOnly:
    """deepstack_output exists on the first `deepstack_blocks` blocks only: say so on the others."""

    def _require(self, value: Value) -> None:
        super(_DeepStackOnly, self)._require(value)
        index = int(self.path.rsplit(".", 1)[-1])
        count = deepstack_blocks(self._std_model)
        if value.name == "deepstack_output" and index >= count:
            raise Unavailable(f"{self._standard_path()}.deepstack_output is unavailable: DeepStack adds features "
                              f"after blocks 0 to {count - 1} only, one per vision_config.deepstack_visual_indexes "
                              f"entry ({count})")


_DeepStackBlock = host("QwenDeepStackBlock", Block, values=[
    Value("deepstack_output", ImageFeatures,
          "What DeepStack adds to the stream leaving this block, at the image tokens: the features of the "
          "vision block deepstack_visual_indexes[i], through its own merger (blocks below "
          "len(deepstack_visual_indexes) only)",
          AfterBlock(io="input", element=2, name=DEEPSTACK, described="_deepstack_process"),
          conditions=(WITH_IMAGES,)),
], TRACKS_TOKENS=True)

#: ``model.layers[i]`` of a Qwen3-VL line (a mixture's block records its token shape, so every one does)
DeepStackBlock = type("QwenDeepStackBlock", (_DeepStackOnly, _DeepStackBlock), {"HOST": "model.layers[i]"})


class _DeepStackLayers:
    @property
    def deepstack_layers(self) -> list[Any]:
        """The text blocks DeepStack adds to (``model.layers[j]``, j below len(deepstack_visual_indexes)):
        where the relations read ``deepstack_output``, which the others do not have."""
        model = self._std_model
        return [model.layers[j] for j in range(deepstack_blocks(model))]


#: ``model.vision`` of a DeepStack line: the learned positions, and what DeepStack adds to the text blocks
DeepStackVision = type("QwenDeepStackVision", (_DeepStackLayers, PositionedVision),
                       {"HOST": "model.vision", "RELATIONS": relations.DEEPSTACK_RELATIONS})


def install_deepstack(model: Any) -> None:
    """Serve DeepStack's addition after each block that gets one (nothing on a line without DeepStack).

    The text model calls ``_deepstack_process(hidden_states, visual_pos_masks, features)`` right after
    block i; it is wrapped here (on this model's instance) so the call's arguments are served at
    ``{layers[i] path}.deepstack.input`` in a trace, read and replaceable like any value.
    """
    text = model._module.model.language_model
    if not hasattr(type(text), "_deepstack_process"):
        return
    layers = list(model.layers)
    state = {"block": -1}
    for index, layer in enumerate(layers):
        layer._module.register_forward_hook(lambda module, args, output, index=index: state.update(block=index))
    process = type(text)._deepstack_process

    def deepstack(hidden_states: Any, visual_pos_masks: Any, features: Any) -> Any:
        args = (hidden_states, visual_pos_masks, features)
        interleaver = model.interleaver
        if interleaver.interleaving:
            location = f"{layers[state['block']].path}.{DEEPSTACK}.input"
            args, _ = interleaver.handle(location, (args, {}))
        return process(text, *args)

    text._deepstack_process = deepstack


__all__ = ["DEEPSTACK_MOUNTS", "DEEPSTACK_PATHS", "DEEPSTACK", "AfterBlock", "WITH_IMAGES", "deepstack_blocks",
           "DeepStackBlock", "DeepStackVision", "install_deepstack"]
