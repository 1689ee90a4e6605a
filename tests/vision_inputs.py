"""What the vision-line tests share: one thread for the tiny models, a prompt with two images of different sizes
through the family's own processor, and each module's outputs or calls by plain forward hooks (no nnsight)."""

from __future__ import annotations

import contextlib

import pytest
import torch

IMAGE = "image-text-to-text"


@pytest.fixture(autouse=True)
def one_thread():
    """A test module imports this fixture by name (autouse): the tiny models' ops are too small to share threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def image_inputs(model):
    """(prompt, images, encoding): two images of different sizes, each at the processor's image token (which the
    processor expands to the image's tokens)."""
    from nncanon.parts.vision.vision_towers import example_images

    pad = model.processor.image_token
    prompt = f"Compare {pad} with {pad}. Which one is red?"
    images = example_images(model.processor)
    return prompt, images, model.processor(text=prompt, images=images, return_tensors="pt")


@contextlib.contextmanager
def outputs_of(modules):
    """Each module's outputs, by plain forward hooks."""
    seen = {i: [] for i in range(len(modules))}
    handles = [m.register_forward_hook(lambda mod, args, out, i=i: seen[i].append(out)) for i, m in enumerate(modules)]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def calls_of(modules):
    """Each module's (args, kwargs, output), by plain forward hooks."""
    seen = {i: [] for i in range(len(modules))}

    def hook(i):
        return lambda mod, args, kwargs, out: seen[i].append((args, kwargs, out))

    handles = [m.register_forward_hook(hook(i), with_kwargs=True) for i, m in enumerate(modules)]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def check_image_features_edit(model, prompt, images, encoding):
    """Zeroing image_features is the forward on embeddings whose image-token rows are zeros, and moves the logits."""
    hf = model._module
    with torch.no_grad(), model.trace(prompt, images=images):
        model.vision.image_features[:] = 0
        edited = model.logits.save()
    with torch.no_grad():
        embeds = hf.get_input_embeddings()(encoding["input_ids"])
        embeds[encoding["input_ids"] == hf.config.image_token_id] = 0
        expected = hf(inputs_embeds=embeds, attention_mask=encoding["attention_mask"]).logits
        unedited = hf(**encoding).logits
    torch.testing.assert_close(edited, expected)
    assert not torch.allclose(edited, unedited)


def check_tile_features_edit(model, prompt, images, newlines: int):
    """Zeroed tile features leave only the image_newline rows (``newlines`` of them) nonzero in the packed features."""
    with torch.no_grad(), model.trace(prompt, images=images):
        model.vision.tile_features[:] = 0
        features = model.vision.image_features.save()
    newline = model._module.model.image_newline
    nonzero = features.abs().sum(-1) != 0
    assert int(nonzero.sum()) == newlines
    assert torch.equal(features[nonzero], newline.expand(newlines, -1))


def check_wrapper_and_text_load(family: str, text_model_type: str):
    """A wrapper's config names its family whatever its text model, and the text load of its tiny checkpoint has
    no tower and gives the text model's logits."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family
    from nncanon.families import family_for_config

    wrapper = {"model_type": family, "text_config": {"model_type": text_model_type}}
    assert family_for_config(wrapper, "config.json").FAMILY == family
    text = nncanon.load(checkpoint_dir(get_family(family)))
    assert not hasattr(text._module.model, "vision_tower")
    with torch.no_grad(), text.trace("Which one is red?"):
        logits = text.logits.save()
    assert logits.shape[-1] == text._module.config.text_config.vocab_size


def image_load(family: str):
    """The family's tiny checkpoint loaded for images and text."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    return nncanon.load(checkpoint_dir(get_family(family)), task=IMAGE)


def anyres_reads(model, prompt, images, encoding, **image_kwargs):
    """An AnyRes line's vision values and logits read in one trace, and the same computed without nnsight: the
    wrapper's own get_image_features (``image_kwargs``: what else it takes), plain hooks on the tower's embeddings
    (``seen[0]``) and the projector (``seen[1]``), and the plain forward's logits."""
    hf = model._module
    with torch.no_grad(), model.trace(prompt, images=images):
        patches = model.vision.patch_embeddings.save()
        tower_output = model.vision.tower_output.save()
        tiles = model.vision.tile_features.save()
        features = model.vision.image_features.save()
        logits = model.logits.save()
    with torch.no_grad(), outputs_of([hf.model.vision_tower.embeddings, hf.model.multi_modal_projector]) as seen:
        own = hf.model.get_image_features(pixel_values=encoding["pixel_values"], image_sizes=encoding["image_sizes"],
                                          **image_kwargs)
        plain = hf(**encoding).logits
    torch.testing.assert_close(logits, plain)
    assert torch.equal(patches, seen[0][0])
    assert torch.equal(tiles, seen[1][0])
    assert torch.equal(features, torch.cat(list(own.pooler_output)))
    return patches, tower_output, own
