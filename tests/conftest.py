"""Shared fixtures: the family's tiny pinned checkpoint and the models loaded from it.

Loading is the slow part (a second or two each), so every load condition is one
session-scoped fixture; tests must not leave edits behind (nnsight edits last one trace).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

FAMILY = "qwen3_5_moe_text"
#: two prompts of different lengths, so the batch is left-padded
PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


def pytest_configure(config):
    import torch

    # the tiny models' ops are too small to share among threads; one is faster and steadier
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def checkpoint():
    from generator.checkpoints import checkpoint_dir

    return checkpoint_dir(FAMILY)


@pytest.fixture(scope="session")
def prompts():
    return list(PROMPTS)


@pytest.fixture(scope="session")
def model(checkpoint):
    import nncanon

    return nncanon.load(checkpoint)


@pytest.fixture(scope="session")
def eager_model(checkpoint):
    import nncanon

    return nncanon.load(checkpoint, attn_implementation="eager")
