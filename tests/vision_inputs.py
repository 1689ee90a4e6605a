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
