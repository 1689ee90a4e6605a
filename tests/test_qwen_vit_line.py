"""The Qwen ViT line (issue 7): qwen2_vl, qwen2_5_vl, qwen3_vl and qwen3_vl_moe on their tiny pinned
checkpoints, with a prompt holding two images of different sizes.

Every value is checked against something that does not go through nncanon: the Hugging Face
module's own forward, plain PyTorch forward hooks, the modules' math on tensors read elsewhere, or
(for Qwen2.5-VL's window order) a permutation computed here from the image grids alone.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from PIL import Image

import nncanon
from generator.recipe.family import get_family
from nncanon import Unavailable
from nncanon.parts.vision import qwen_vit

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe")
DEEPSTACK = ("qwen3_vl", "qwen3_vl_moe")
PAD = "<|vision_start|><|image_pad|><|vision_end|>"
PROMPT = f"Compare {PAD} with {PAD}. Which one is red?"
WRAPPERS = {"qwen2_vl": "Qwen2VLForConditionalGeneration", "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
            "qwen3_vl": "Qwen3VLForConditionalGeneration", "qwen3_vl_moe": "Qwen3VLMoeForConditionalGeneration"}


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models():
    """family -> the image-text-to-text load of its tiny checkpoint (loaded on first use)."""
    from generator.checkpoint.checkpoints import checkpoint_dir

    cache: dict = {}

    def get(family: str):
        if family not in cache:
            cache[family] = nncanon.load(checkpoint_dir(get_family(family)), task="image-text-to-text")
        return cache[family]

    return get


def images(model) -> list[Image.Image]:
    """A red square (2 x 2 merge blocks) and a wide image of seeded noise (2 x 4), at the family's patch size."""
    return qwen_vit.example_images(model.processor)


def inputs(model):
    return model.processor(text=PROMPT, images=images(model), return_tensors="pt")


def visual(model):
    """The Hugging Face module's own vision encoder (nnsight passes through outside a trace)."""
    return model._module.model.visual


# -- loading and tracing --------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_loads_the_wrapper_and_traces_two_images(family, models):
    model = models(family)
    assert model.family == family
    assert type(model._module).__name__ == WRAPPERS[family]
    assert model.vision._module is visual(model) and model.projector._module is visual(model).merger
    batch = inputs(model)
    assert batch["image_grid_thw"].tolist() == [[1, 4, 4], [1, 4, 8]]  # each image its own grid, no resize
    with model.trace(PROMPT, images=images(model)):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
        logits = model.logits.save()
    assert int(mask.sum()) == features.shape[0] == (16 + 32) // 4
    assert features.shape[1] == model.hidden_size
    assert torch.equal(first[mask], features)
    with torch.no_grad():
        plain = model._module(**batch).logits
    torch.testing.assert_close(logits, plain, rtol=0, atol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_text_generation_is_the_wrapper_without_its_encoder(family, models):
    from generator.checkpoint.checkpoints import checkpoint_dir

    text = nncanon.load(checkpoint_dir(get_family(family)))
    assert type(text._module).__name__ == WRAPPERS[family]
    assert not hasattr(text._module.model, "visual") and not hasattr(text, "vision")
    prompt = "The cat sat on the mat."
    with text.trace(prompt):
        alone = text.logits.save()
    model = models(family)
    ids = model.tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        whole = model._module(**ids).logits  # the same weights, the vision encoder idle
    torch.testing.assert_close(alone, whole, rtol=0, atol=0)


# -- the vision block, on every line ----------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_vision_block_identity_and_mlp(family, models):
    model = models(family)
    for i in range(model.vision.num_layers):
        block = model.vision.layers[i]
        with model.trace(PROMPT, images=images(model)):
            x = block.input.save()
            attention = block.self_attn.attention_output.save()
            mlp_in = block.mlp_input.save()
            activation = block.mlp.mlp_activation.save()
            neurons = block.mlp.mlp_neurons.save()
            mlp = block.mlp.mlp_output.save()
            out = block.layer_output.save()
        native = visual(model).blocks[i]
        assert block._module is native and block.self_attn.o_proj._module is native.attn.proj
        assert torch.equal(x + attention + mlp, out)  # the identity, across [P, H] and [1, P, H]
        assert not torch.equal(out[0], x)
        assert torch.equal(mlp_in[0], native.norm2(x + attention[0]))
        if family == "qwen2_5_vl":  # SwiGLU: act(gate) * up
            assert torch.equal(activation[0], native.mlp.act_fn(native.mlp.gate_proj(mlp_in[0])))
            assert torch.equal(neurons[0], activation[0] * native.mlp.up_proj(mlp_in[0]))
            assert torch.equal(mlp[0], native.mlp.down_proj(neurons[0]))
        else:  # two linears around the activation, no gate
            first, second = ("fc1", "fc2") if family == "qwen2_vl" else ("linear_fc1", "linear_fc2")
            act = native.mlp.act if family == "qwen2_vl" else native.mlp.act_fn
            assert torch.equal(activation[0], act(getattr(native.mlp, first)(mlp_in[0])))
            assert torch.equal(neurons, activation)
            assert torch.equal(mlp[0], getattr(native.mlp, second)(neurons[0]))


# -- Qwen2.5-VL: window order inside the encoder, scatter order after it --------------------------------


def window_permutation(grid_thw: torch.Tensor, window_size: int, patch: int, merge: int) -> tuple[list, list]:
    """(merge block order, patches per window) of the windowed encoder, from the image grids alone.

    Each image's grid of merge blocks, frame by frame, is cut into windows of
    ``window_size / (patch * merge)`` blocks a side from the top left (the last row and column of
    windows may be smaller); the blocks are laid out window after window, raster order inside each.
    """
    side = window_size // (patch * merge)
    order, lengths, start = [], [], 0
    for t, h, w in grid_thw.tolist():
        rows, cols = h // merge, w // merge
        for frame in range(t):
            base = start + frame * rows * cols
            for top in range(0, rows, side):
                for left in range(0, cols, side):
                    window = [base + r * cols + c for r in range(top, min(top + side, rows))
                              for c in range(left, min(left + side, cols))]
                    order += window
                    lengths.append(len(window) * merge * merge)
        start += t * rows * cols
    return order, lengths


def test_window_permutation_by_hand_on_a_ragged_grid():
    # 3 x 5 merge blocks in windows of 2 x 2: windows of 4, 4, 2 (top) and 2, 2, 1 (bottom)
    order, lengths = window_permutation(torch.tensor([[1, 6, 10]]), window_size=56, patch=14, merge=2)
    assert order == [0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 12, 13, 14]
    assert lengths == [16, 16, 8, 8, 8, 4]


def test_qwen2_5_vl_window_order_and_scatter_order(models):
    model = models("qwen2_5_vl")
    vision = model.vision
    grid = inputs(model)["image_grid_thw"]
    order, lengths = window_permutation(grid, vision.window_size, vision.patch_size, vision.spatial_merge_size)
    assert order != sorted(order)  # the example images span more than one window
    rows = torch.tensor([4 * b + k for b in order for k in range(4)])  # each merge block's four patches
    cu_windows = [0, *torch.tensor(lengths).cumsum(0).tolist()]
    cu_images = [0, *grid.prod(-1).cumsum(0).tolist()]
    full = set(model.config.vision_config.fullatt_block_indexes)
    assert full and full != set(range(vision.num_layers))

    reads: dict = {}
    with model.trace(PROMPT, images=images(model)):
        mask = model.vision.image_token_mask.save()  # the model's own input: read first
        reads["index"] = vision.window_index.save()
        reads["embedded"] = vision.patch_embeddings.save()
        for i in range(vision.num_layers):
            attn = vision.layers[i].self_attn
            reads[i] = (vision.layers[i].input.save(), attn.inputs[1]["cu_seqlens"].save(),
                        attn.attention_queries.save(), attn.attention_keys.save(), attn.attention_values.save(),
                        attn.attention_head_outputs.save())
        reads["fed"] = model.projector.input.save()
        reads["merged"] = model.projector.output.save()
        reads["tower"] = vision.tower_output.save()
        reads["features"] = vision.image_features.save()
        first = model.layers[0].input.save()

    assert reads["index"].tolist() == order
    # into window order at entry: the first block reads the embedded patches permuted
    assert torch.equal(reads[0][0], reads["embedded"][0][rows])
    assert not torch.equal(reads[0][0], reads["embedded"][0])
    # inside: every windowed block attends within the windows as laid out in window order
    for i in range(vision.num_layers):
        _, cu, q, k, v, heads = reads[i]
        assert cu.tolist() == (cu_images if i in full else cu_windows)
        mixed = torch.cat([(q[0, :, a:b] @ k[0, :, a:b].transpose(-1, -2) * vision.head_dim ** -0.5).softmax(-1)
                           @ v[0, :, a:b] for a, b in zip(cu[:-1].tolist(), cu[1:].tolist())], dim=1)
        # scores over head dim, a softmax and a weighted sum over a window's <= 16 rows, by hand against SDPA:
        # <= 48 roundings, 2 gamma_48 = 5.7e-6 < 1e-5 relative; atol for outputs that cancel near 0
        torch.testing.assert_close(mixed.transpose(0, 1), heads[0], rtol=1e-5, atol=1e-6)
    assert torch.equal(reads["fed"], reads["tower"][0])  # tower_output: still window order
    # out: the merger's output is in window order, image_features back in merge-block (scatter) order
    inverse = torch.tensor(order).argsort()
    assert torch.equal(reads["features"], reads["merged"][inverse])
    assert not torch.equal(reads["features"], reads["merged"])
    assert torch.equal(first[mask], reads["features"])
    # the encoder run alone, without nncanon, in merge-block order in and out
    with torch.no_grad():
        batch = inputs(model)
        alone = visual(model)(batch["pixel_values"], grid_thw=batch["image_grid_thw"])
    assert torch.equal(alone.last_hidden_state, reads["tower"][0])
    assert torch.equal(alone.pooler_output, reads["features"])


def test_qwen2_5_vl_an_edit_in_window_order_lands_on_its_blocks(models):
    model = models("qwen2_5_vl")
    vision = model.vision
    order, lengths = window_permutation(inputs(model)["image_grid_thw"], vision.window_size, vision.patch_size,
                                        vision.spatial_merge_size)
    # the second window of the stream (window order): the wide image's left 2 x 2 merge blocks
    start, length = lengths[0], lengths[1]
    blocks = order[start // 4:(start + length) // 4]
    assert blocks == [4, 5, 8, 9]
    last = vision.layers[vision.num_layers - 1]
    with model.trace(PROMPT, images=images(model)):
        base = vision.image_features.save()
    with model.trace(PROMPT, images=images(model)):
        last.layer_output[:, start:start + length] = 0  # in place, in window order
        edited = vision.image_features.save()
    changed = (edited != base).any(-1).nonzero().flatten().tolist()
    assert changed == sorted(blocks)  # in scatter order, exactly those merge blocks moved


# -- Qwen3-VL and -MoE: DeepStack ---------------------------------------------------------------------


@pytest.mark.parametrize("family", DEEPSTACK)
def test_deepstack_values_and_where_they_enter(family, models):
    model = models(family)
    taps = list(model.config.vision_config.deepstack_visual_indexes)
    assert len(taps) == 2 and taps != list(range(len(taps)))
    native: list = []
    hooks = [merger.register_forward_hook(lambda module, args, output: native.append(output.detach().clone()))
             for merger in visual(model).deepstack_merger_list]
    try:
        reads: dict = {}
        with model.trace(PROMPT, images=images(model)):
            mask = model.vision.image_token_mask.save()
            for j, index in enumerate(taps):
                reads["tapped", j] = model.vision.layers[index].layer_output.save()
                reads["fed", j] = model.deepstack_projectors[j].input.save()
            for j in range(len(taps)):
                reads["leaving", j] = model.layers[j].layer_output.save()
                reads["added", j] = model.layers[j].deepstack_output.save()
                reads["entering", j + 1] = model.layers[j + 1].input.save()
            reads["leaving", len(taps)] = model.layers[len(taps)].layer_output.save()
            reads["entering", len(taps) + 1] = model.layers[len(taps) + 1].input.save()
    finally:
        for hook in hooks:
            hook.remove()
    assert len(native) == len(taps)
    for j in range(len(taps)):
        added = reads["added", j]
        assert added.shape == (int(mask.sum()), model.hidden_size)
        assert torch.equal(added, native[j])  # the DeepStack merger's output, as a plain hook sees it
        assert torch.equal(reads["fed", j], reads["tapped", j][0])  # which reads vision block taps[j]
        leaving, entering = reads["leaving", j], reads["entering", j + 1]
        assert torch.equal(entering[mask], leaving[mask] + added)  # added at the image tokens after block j
        assert torch.equal(entering[~mask], leaving[~mask])  # and nowhere else
    # past the taps the stream passes from block to block untouched
    assert torch.equal(reads["entering", len(taps) + 1], reads["leaving", len(taps)])
    with pytest.raises(Unavailable, match=f"after blocks 0 to {len(taps) - 1} only"):
        with model.trace(PROMPT, images=images(model)):
            model.layers[len(taps)].deepstack_output.save()


@pytest.mark.parametrize("family", DEEPSTACK)
def test_zeroing_deepstack_is_removing_it(family, models):
    model = models(family)
    batch = inputs(model)
    with model.trace(PROMPT, images=images(model)):
        base = model.logits.save()
    with torch.no_grad():
        torch.testing.assert_close(base, model._module(**batch).logits, rtol=0, atol=0)
    for j, merger in enumerate(visual(model).deepstack_merger_list):
        hook = merger.register_forward_hook(lambda module, args, output: torch.zeros_like(output))
        try:
            with torch.no_grad():
                removed = model._module(**batch).logits
        finally:
            hook.remove()
        with model.trace(PROMPT, images=images(model)):  # an assignment
            model.layers[j].deepstack_output = torch.zeros_like(model.layers[j].deepstack_output)
            assigned = model.logits.save()
        with model.trace(PROMPT, images=images(model)):  # an in-place edit of the view
            model.layers[j].deepstack_output[:] = 0
            in_place = model.logits.save()
        assert not torch.equal(removed, base)
        torch.testing.assert_close(assigned, removed, rtol=0, atol=0)
        torch.testing.assert_close(in_place, removed, rtol=0, atol=0)


@pytest.mark.parametrize("family", DEEPSTACK)
def test_deepstack_output_needs_images(family):
    from generator.checkpoint.checkpoints import checkpoint_dir

    text = nncanon.load(checkpoint_dir(get_family(family)))
    row = next(r for r in text.support() if r.host == "model.layers[i]" and r.name == "deepstack_output")
    assert not row.available and 'task="image-text-to-text"' in row.condition
    with pytest.raises(Unavailable, match="image-text-to-text"):
        with text.trace("A dog ran."):
            text.layers[0].deepstack_output.save()


def test_lines_without_deepstack_have_no_deepstack_output(models):
    for family in ("qwen2_vl", "qwen2_5_vl"):
        assert not hasattr(models(family).layers[0], "deepstack_output")


# -- the full-size printouts ------------------------------------------------------------------------

PRINTOUTS = {
    "qwen2_vl": ("Qwen/Qwen2-VL-7B-Instruct",
                 ["(0-31): 32 x Qwen2VLVisionBlock", "(0-27): 28 x Qwen2VLDecoderLayer", "Embedding(152064, 3584)",
                  "(linear_fc1/fc1): Linear(in_features=1280, out_features=5120", "(act_fn/act): QuickGELUActivation",
                  "(down_proj/fc2)", "(norm/ln_q): LayerNorm((1280,)", "(down_proj): Linear(in_features=5120, "
                  "out_features=3584"]),
    "qwen2_5_vl": ("Qwen/Qwen2.5-VL-7B-Instruct",
                   ["(0-31): 32 x Qwen2_5_VLVisionBlock", "(input_layernorm/norm1): Qwen2_5_VLRMSNorm((1280,)",
                    "(gate_proj): Linear(in_features=1280, out_features=3420, bias=True)", "(norm/ln_q): Qwen2_5_VLRMSNorm",
                    "(window_index) -> WindowIndex [image_tokens]"]),
    "qwen3_vl": ("Qwen/Qwen3-VL-8B-Instruct",
                 ["(0-26): 27 x Qwen3VLVisionBlock", "(0-35): 36 x Qwen3VLTextDecoderLayer", "(pos_embed): Embedding(2304, 1152)",
                  "(down_proj/linear_fc2): Linear(in_features=4304, out_features=1152", "(q_norm)",
                  "(deepstack_projectors): ModuleList", "(0-2): 3 x Qwen3VLVisionPatchMerger",
                  "(deepstack_output) -> ImageFeatures [image_tokens hidden_size]"]),
    "qwen3_vl_moe": ("Qwen/Qwen3-VL-30B-A3B-Instruct",
                     ["(0-47): 48 x Qwen3VLMoeTextDecoderLayer", "(router/gate): Qwen3VLMoeTextTopKRouter",
                      "(router_logits) -> RouterLogits [batch seq num_experts]", "(deepstack_projectors): ModuleList",
                      "(deepstack_output) -> ImageFeatures [image_tokens hidden_size]",
                      "(down_proj/linear_fc2): Linear(in_features=4608, out_features=2048"]),
}
STANDARD = ["(embed_tokens): Embedding", "(layers): ModuleList", "(norm):", "(vision):", "(layers/blocks): ModuleList",
            "(input_layernorm/norm1)", "(post_attention_layernorm/norm2)", "(self_attn/attn)", "(o_proj/proj)",
            "(projector):", "(layer_output) -> Patches [images patches vision_hidden_size]",
            "(image_features) -> ImageFeatures [image_tokens hidden_size]", "(attention_head_outputs) -> HeadOutputs",
            "(logits) -> Logits [batch seq vocab_size]"]


@pytest.mark.parametrize("family", FAMILIES)
def test_print_of_the_meta_full_size_wrapper_shows_the_standard_names(family):
    from generator.facts.configs import full_size
    from generator.recipe.family import get_family

    checkpoint, own = PRINTOUTS[family]
    fam = get_family(family)
    model = full_size(fam, importlib.import_module(fam.module), checkpoint, "image-text-to-text", None)
    assert next(model._module.parameters()).device.type == "meta"
    text = repr(model)
    missing = [name for name in [*STANDARD, *own] if name not in text]
    assert not missing, f"{family}: print(model) lacks {missing}"
    assert "\n  (model): " not in text  # the backbone is shown through its mounts, not natively
