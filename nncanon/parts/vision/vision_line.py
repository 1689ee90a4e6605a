"""The vision line every vision-language family instantiates: a tower, a projector, the image tokens.

A vision-language wrapper reads each image with a vision tower (``model.vision``: the Qwen ViT,
CLIP, SigLIP), turns the tower's output into image features the width of the text stream with a
projector (``model.projector``: a merger, an MLP, a pooling projector), and hands them to the text
stack at the image tokens of the prompt: ``inputs_embeds.masked_scatter(image_token_mask, image_features)``.
What every line shares is written here once, by the same names on each:

- the mounts (`VISION`, `PROJECTOR`): the tower is ``model.vision``, the projector ``model.projector``;
- the values on ``model.vision``: ``image_token_mask`` (`image_token_mask_value`: input_ids == the
  config's image_token_id), ``image_features`` (`image_features_value`: what the scatter writes at
  the image tokens, read at the wrapper's ``masked_scatter``), next to each line's own
  ``patch_embeddings`` and ``tower_output``;
- the relations: the mask (`MASK`), the scatter (`SCATTER`: the first text block reads the image
  features at the image tokens, one row each, in order), and the text root's embeddings stated off
  the image tokens (`IMAGE_ROOT_RELATIONS`);
- the locators a tower's values need to read the root (`AtRoot`, `Worded`, `install_sources`).

A line (``parts/qwen_vit``, ``families/llava``) adds its tower's hosts and the relations only it has:
how the tower's stream is built, which of its hidden states is the tower's output, what the projector
computes from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.layouts import ImageFeatures, ImageTokenMask
from ...core.locators import Locator
from ...core.relations import Relation, relation
from ...core.values import Value, View
from ..blocks.decoder import ROOT_RELATIONS

#: where every line mounts its tower and its projector
VISION, PROJECTOR = "vision", "projector"

# -- locators ------------------------------------------------------------------------


@dataclass(frozen=True)
class Worded(Locator):
    """A locator whose "read at" sentence is given (``words``) rather than generated.

    For a point whose generated sentence would name plumbing the reader does not need, e.g.
    the ``last_hidden_state`` field of the encoder's output, which is "the module's own output".
    """

    words: str = ""

    def read_at(self) -> str:
        return self.words or super(Worded, self).read_at()


@dataclass(frozen=True)
class AtRoot(Worded):
    """A point of the root model's tree, for a value served on a host below it.

    ``module`` and ``ops`` are resolved from the `StandardModel` itself (``module="model"`` is
    the wrapper's ``model.model``), not from the host. The ``.source`` ops are installed by
    `install_sources` (called from the family's ``prepare``), as the root's installer only
    knows a host's own children.
    """

    def base(self, host: Any) -> Any:
        return super(AtRoot, self).base(host._std_model)

    def sourced_modules(self) -> tuple[str | None, ...]:
        return ()


def install_sources(model: Any) -> None:
    """Install, before any trace, the ``.source`` ops the `AtRoot` values of ``model`` read."""
    for envoy in model._hosts:
        for value in type(envoy).values():
            locator = value.locator
            if isinstance(locator, AtRoot) and locator.ops:
                base = model if locator.module is None else model.get(locator.module)
                getattr(base.source, locator.ops[0])


# -- the image tokens ---------------------------------------------------------------------


def image_tokens(model: Any, ids: Any) -> Any:
    """Where ``ids`` are the image token (the root config's image_token_id; nowhere when it has none)."""
    import torch

    token = getattr(model._module.config, "image_token_id", None)
    return ids == token if token is not None else torch.zeros_like(ids, dtype=torch.bool)


def _image_token_mask(host: Any, ids: Any) -> Any:
    return ids == host._std_model._module.config.image_token_id


#: input_ids -> where they are the image token; derived, read-only
IMAGE_TOKENS = View("input_ids == image_token_id", _image_token_mask, None)


def image_token_mask_value() -> Value:
    """``model.vision.image_token_mask``: where the prompt holds image tokens (read at the root's input_ids)."""
    return Value("image_token_mask", ImageTokenMask,
                 "Which positions hold image tokens: input_ids == the config's image_token_id; read-only",
                 AtRoot(io="input", element="input_ids", words="the model's own inputs, at the root"),
                 view=IMAGE_TOKENS)


#: a wrapper whose scatter is handed the features [images, tokens per image, hidden]: served flat, one row per token
FLAT = View("flattened over images and their tokens", lambda host, x: x.flatten(0, -2),
            lambda host, new, current: new.reshape(current.shape))


def image_features_value(scatter: str = "inputs_embeds_masked_scatter_0", view: View | None = None) -> Value:
    """``model.vision.image_features``: the features the wrapper's ``scatter`` op writes at the image tokens (through
    ``view``, `FLAT` where the scatter is handed them per image)."""
    return Value("image_features", ImageFeatures,
                 "The image features the text model receives at the image tokens, flat over them",
                 AtRoot(io="input", module="model", shown="model.model", ops=(scatter,), element=1),
                 **({"view": view} if view is not None else {}))


# -- relations ------------------------------------------------------------------------------


def replace(base: tuple[Relation, ...], **by_proof: Relation) -> tuple[Relation, ...]:
    """``base`` with the relation proving each key replaced (the key: its proves, ``_`` for dots, no ``[*]``)."""
    key = lambda r: "_".join(r.proves).replace(".", "_").replace("[*]", "")  # noqa: E731
    missing = set(by_proof) - {key(r) for r in base}
    if missing:
        raise LookupError(f"no relation proves {sorted(missing)}")
    return tuple(by_proof.get(key(r), r) for r in base)


@relation("layers[0].layer_input == token_embeddings off the image tokens (input_ids != image_token_id; "
          "vision.image_features on them); token_embeddings == embed_tokens(input_ids)",
          proves="token_embeddings", reads="input_ids token_embeddings layers[0].layer_input")
def _embeddings(host, r):
    ids, embedded, entering = r["input_ids"], r["token_embeddings"], r["layers[0].layer_input"]
    text = ~image_tokens(host, ids)
    return [(host.embed_tokens._module(ids), embedded), (embedded[text], entering[text])]


#: the text root of a vision-language line: the shared relations, the embeddings' stated off the image tokens
#: (it holds under every load: a text prompt, or a text-only load, has no image token)
IMAGE_ROOT_RELATIONS = replace(ROOT_RELATIONS, token_embeddings=_embeddings)
EMBEDDINGS_OFF_IMAGES = _embeddings


@relation("image_token_mask == (input_ids == image_token_id)", proves="image_token_mask",
          reads="model.input_ids image_token_mask")
def MASK(host, r):
    return [(image_tokens(host._std_model, r["model.input_ids"]), r["image_token_mask"])]


@relation("layers[0].layer_input == image_features at the image tokens (image_token_mask), one row each, in order",
          proves="image_features", reads="image_token_mask model.layers[0].layer_input image_features")
def SCATTER(host, r):
    return [(r["model.layers[0].layer_input"][r["image_token_mask"]], r["image_features"])]


__all__ = ["VISION", "PROJECTOR", "Worded", "AtRoot", "install_sources", "image_tokens", "IMAGE_TOKENS",
           "image_token_mask_value", "FLAT", "image_features_value", "replace", "IMAGE_ROOT_RELATIONS",
           "EMBEDDINGS_OFF_IMAGES", "MASK", "SCATTER"]
