"""The vision encoder (issue 4): image-text-to-text loading, model.vision, model.projector and the
image values, on the tiny pinned checkpoint with two images of different sizes.

Every served value is checked against a computation that does not go through nncanon: the
module's own math on tensors read elsewhere, plain PyTorch forward hooks on the Hugging Face
module, or an image cut into patches here with numpy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from float_error import within
from nnsight.intervention.interleaver import OutOfOrderError
from PIL import Image

import nncanon
from generator.recipe.family import get_family
from nncanon import ReadOnly, Unavailable

PAD = "<|vision_start|><|image_pad|><|vision_end|>"
#: two images in one prompt: the red square first, the wide image second
PROMPT = f"Compare {PAD} with {PAD}. Which one is red?"
ONE = f"Look at {PAD} now."
NO_PATTERN = "no one tensor is the block's pattern"


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def red():
    """A red square: 64 x 64 pixels, 4 x 4 patches."""
    return Image.new("RGB", (64, 64), (255, 0, 0))


@pytest.fixture(scope="module")
def wide():
    """A wide image of seeded noise (every patch differs): 128 x 64 pixels, 4 x 8 patches."""
    pixels = np.random.default_rng(0).integers(0, 256, size=(64, 128, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


@pytest.fixture(scope="module")
def vision(checkpoint):
    return nncanon.load(checkpoint, task="image-text-to-text")


@pytest.fixture(scope="module")
def vision_eager(checkpoint):
    return nncanon.load(checkpoint, task="image-text-to-text", attn_implementation="eager")


@pytest.fixture(scope="module")
def inputs(vision, red, wide):
    """What the processor makes of PROMPT and the two images (the trace runs the same call)."""
    return vision.processor(text=PROMPT, images=[red, wide], return_tensors="pt")


@pytest.fixture(scope="module")
def sizes(inputs):
    """Patches per image, t * h * w from image_grid_thw."""
    return inputs["image_grid_thw"].prod(-1).tolist()


def native(model):
    """The Hugging Face module's own visual encoder (nnsight passes through outside a trace)."""
    return model._module.model.visual


def rotate_half(x):
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


# -- loading and names --------------------------------------------------------------------


def test_loads_the_wrapper_with_its_processor(vision):
    from nncanon.core.processing import QwenImageTextProcessor

    assert type(vision._module).__name__ == "Qwen3_5MoeForConditionalGeneration"
    assert isinstance(vision.processor, QwenImageTextProcessor)
    assert vision.tokenizer is vision.processor.tokenizer
    hf = vision._module.model
    assert vision.vision._module is hf.visual
    assert vision.projector._module is hf.visual.merger
    assert vision.layers._module is hf.language_model.layers
    assert vision.embed_tokens._module is hf.language_model.embed_tokens
    assert len(vision.vision.layers) == vision.vision.num_layers == len(hf.visual.blocks)
    block = vision.vision.layers[0]
    assert block._module is hf.visual.blocks[0]
    assert block.input_layernorm._module is hf.visual.blocks[0].norm1
    assert block.post_attention_layernorm._module is hf.visual.blocks[0].norm2
    assert block.self_attn._module is hf.visual.blocks[0].attn
    assert block.self_attn.o_proj._module is hf.visual.blocks[0].attn.proj
    assert block.mlp.down_proj._module is hf.visual.blocks[0].mlp.linear_fc2
    assert vision.projector.down_proj._module is hf.visual.merger.linear_fc2
    # proj is o_proj on the attention only: the patch embedding's convolution keeps its name
    assert not hasattr(vision.vision.patch_embed, "o_proj")
    assert vision.vision.patch_embed.proj._module is hf.visual.patch_embed.proj


def test_config_accessors(vision, inputs):
    config = vision._module.config.vision_config
    v = vision.vision
    assert v.num_layers == config.depth
    assert v.vision_hidden_size == config.hidden_size
    assert v.num_heads == config.num_heads
    assert v.head_dim == config.hidden_size // config.num_heads
    assert v.intermediate_size == config.intermediate_size
    assert v.patch_size == config.patch_size
    assert inputs["pixel_values"].shape[-1] == 3 * config.temporal_patch_size * v.patch_size ** 2
    assert v.spatial_merge_size == config.spatial_merge_size == 2
    assert v.window_size is None
    with pytest.raises(Unavailable, match="the processor cuts each image into its own grid"):
        _ = v.image_size


# -- patches, the per-image split and the merge-block order ---------------------------------------


def test_patches_per_image_and_the_split(vision, red, wide, inputs, sizes):
    grid = inputs["image_grid_thw"]
    assert grid.tolist() == [[1, 4, 4], [1, 4, 8]]  # each image its own grid, no resize
    assert sizes == [16, 32]
    cu_expected = [0, *np.cumsum(sizes).tolist()]
    with vision.trace(PROMPT, images=[red, wide]):
        cu = vision.vision.layers[1].self_attn.inputs[1]["cu_seqlens"].save()
        patches = vision.vision.layers[1].layer_output.save()
        native_out = vision.vision.layers[1].output.save()
    assert patches.shape == (1, sum(sizes), vision.vision.vision_hidden_size)
    assert native_out.shape == (sum(sizes), vision.vision.vision_hidden_size)  # .output stays native
    assert cu.tolist() == cu_expected
    per_image = patches[0].split(sizes)
    # The attention runs once per image, so each image's rows are what the image gives alone.
    for image, rows in zip([red, wide], per_image):
        with vision.trace(ONE, images=[image]):
            alone = vision.vision.layers[1].layer_output.save()
        assert alone.shape[1] == rows.shape[0]
        # an image's rows in a batch of two images and alone: the same per-image attention, one step reordered
        torch.testing.assert_close(rows, alone[0], rtol=1e-5, atol=1e-5)


def _raster_to_merge_blocks(image, processor, merge=2):
    """The image's patch rows cut here: the raster grid of patches reordered into merge blocks."""
    ip = processor.image_processor
    size = ip.patch_size
    t = ip.temporal_patch_size
    arr = np.asarray(image.convert("RGB"), dtype=np.float64) / 255.0
    arr = (arr - np.asarray(ip.image_mean)) / np.asarray(ip.image_std)
    arr = torch.from_numpy(arr).permute(2, 0, 1)  # [C, H, W]
    h, w = arr.shape[1] // size, arr.shape[2] // size
    raster = [[arr[:, r * size:(r + 1) * size, c * size:(c + 1) * size] for c in range(w)] for r in range(h)]
    rows = []
    for bi in range(h // merge):
        for bj in range(w // merge):
            for di in range(merge):
                for dj in range(merge):
                    patch = raster[bi * merge + di][bj * merge + dj]  # [C, P, P]
                    rows.append(torch.stack([patch] * t, dim=1).reshape(-1))  # [C, T, P, P] flat
    return torch.stack(rows).float()


def test_merge_block_order(vision, red, wide, inputs, sizes):
    expected = torch.cat([_raster_to_merge_blocks(red, vision.processor),
                          _raster_to_merge_blocks(wide, vision.processor)])
    # the processor's normalisation ((x / 255 - mean) / std in float32) and ours: two roundings of O(2) values
    torch.testing.assert_close(inputs["pixel_values"], expected, rtol=0, atol=1e-5)
    # a raster order would not match (the wide image's patches all differ)
    wide_rows = expected[sizes[0]:]
    raster = wide_rows.view(2, 4, 2, 2, -1).permute(0, 2, 1, 3, 4).reshape(32, -1)  # blocks -> raster
    assert not torch.allclose(inputs["pixel_values"][sizes[0]:], raster)

    with vision.trace(PROMPT, images=[red, wide]):
        embedded = vision.vision.patch_embeddings.save()
        fed = vision.projector.input.save()
        merged = vision.projector.output.save()
    conv = native(vision).patch_embed.proj
    by_hand = expected @ conv.weight.reshape(conv.weight.shape[0], -1).T + conv.bias
    assert embedded.shape == (1, sum(sizes), vision.vision.vision_hidden_size)
    # a Conv3d against a matmul over every input of a patch (channels x frames x side x side): two orders of that
    # many roundings, at the magnitude of the terms they sum, sum |x w| (the deterministic bound, Higham 3.1)
    weight = conv.weight.detach().reshape(conv.weight.shape[0], -1)
    terms = float((expected.abs() @ weight.abs().T).max())
    within(embedded[0], by_hand, weight.shape[1] + 1, floor=terms)

    # The merger folds each 4 consecutive rows (one 2 x 2 block) into one image token.
    merger = native(vision).merger
    width = vision.vision.vision_hidden_size
    normed = F.layer_norm(fed, (width,), merger.norm.weight, merger.norm.bias, merger.norm.eps)
    folded = normed.reshape(-1, 4 * width)
    # the merger's own modules on its own input: the same ops, only the batch layout differs
    torch.testing.assert_close(merged, merger.linear_fc2(F.gelu(merger.linear_fc1(folded))), rtol=1e-6, atol=1e-6)
    assert merged.shape[0] == sum(sizes) // 4


# -- the attention ---------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["vision_eager", "vision"])
def test_patterns_from_cu_seqlens_reproduce_the_head_outputs(which, request, red, wide, sizes):
    model = request.getfixturevalue(which)
    attn = model.vision.layers[1].self_attn
    with model.trace(PROMPT, images=[red, wide]):
        cu = attn.inputs[1]["cu_seqlens"].save()  # read first: the module's input
        q = attn.attention_queries.save()
        k = attn.attention_keys.save()
        v = attn.attention_values.save()
        heads = attn.attention_head_outputs.save()
    n, h, d = sum(sizes), model.vision.num_heads, model.vision.head_dim
    assert q.shape == k.shape == v.shape == (1, h, n, d)  # whole, before the per-image split
    assert heads.shape == (1, n, h, d)
    assert cu.tolist() == [0, *np.cumsum(sizes).tolist()]
    outputs = []
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        scores = q[0, :, a:b] @ k[0, :, a:b].transpose(-1, -2) * d ** -0.5
        pattern = scores.softmax(-1)  # [heads, patches_j, patches_j]
        outputs.append((pattern @ v[0, :, a:b]).transpose(0, 1))
    rebuilt = torch.cat(outputs)[None]
    if which == "vision_eager":
        assert torch.equal(rebuilt, heads)  # the same ops eager runs: exact
    else:
        # by hand against SDPA: scores, softmax, weighted sum over <= 16 rows: <= 48 roundings, < 1e-5 relative
        torch.testing.assert_close(rebuilt, heads, rtol=1e-5, atol=1e-6)
    # one pattern over the whole row (images attending to each other) does not reproduce them
    whole = ((q[0] @ k[0].transpose(-1, -2) * d ** -0.5).softmax(-1) @ v[0]).transpose(0, 1)
    assert not torch.allclose(whole[None], heads, atol=1e-4)


def test_queries_keys_values_premix_and_output_by_the_modules_math(vision, red, wide, sizes):
    attn = vision.vision.layers[0].self_attn
    with vision.trace(PROMPT, images=[red, wide]):
        normed = vision.vision.layers[0].attention_norm_output.save()
        kwargs = attn.inputs[1].save()
        q = attn.attention_queries.save()
        k = attn.attention_keys.save()
        v = attn.attention_values.save()
        heads = attn.attention_head_outputs.save()
        premix = attn.attention_premix.save()
        out = attn.attention_output.save()
    module = native(vision).blocks[0].attn
    n, h, d = sum(sizes), vision.vision.num_heads, vision.vision.head_dim
    qkv = module.qkv(normed[0]).reshape(n, 3, h, d).permute(1, 0, 2, 3)
    cos, sin = (t.unsqueeze(-2) for t in kwargs["position_embeddings"])
    turned = [x * cos + rotate_half(x) * sin for x in (qkv[0], qkv[1])]
    # the qkv projection and the rotary by hand: one projection and two products, one step (STEP)
    torch.testing.assert_close(q, turned[0].transpose(0, 1)[None], rtol=1e-5, atol=1e-6)  # after the rotary
    torch.testing.assert_close(k, turned[1].transpose(0, 1)[None], rtol=1e-5, atol=1e-6)
    assert torch.equal(v, qkv[2].transpose(0, 1)[None])
    assert premix.shape == (1, n, h, d)
    assert torch.equal(premix, heads)
    assert out.shape == (1, n, vision.vision.vision_hidden_size)
    torch.testing.assert_close(out[0], module.proj(heads.reshape(n, h * d)), rtol=0, atol=0)


@pytest.mark.parametrize("which", ["vision_eager", "vision"])
def test_attention_pattern_is_unavailable_under_every_implementation(which, request, red):
    model = request.getfixturevalue(which)
    assert native(model).config._attn_implementation == ("eager" if which == "vision_eager" else "sdpa")
    for name in ("attention_scores", "attention_probabilities"):
        with pytest.raises(Unavailable, match=NO_PATTERN):
            with model.trace(ONE, images=[red]):
                getattr(model.vision.layers[0].self_attn, name).save()
    rows = {(r.host, r.name): r for r in model.support()}
    for name in ("attention_scores", "attention_probabilities"):
        row = rows[("model.vision.layers[i].self_attn", name)]
        assert not row.available and row.condition == NO_PATTERN
    # the text attention's pattern is still served under eager
    assert rows[("model.layers[i].self_attn", "attention_scores")].available == (which == "vision_eager")


# -- the block and its MLP ----------------------------------------------------------------------


def test_vision_block_identity_and_its_parts(vision, red, wide):
    for i in range(vision.vision.num_layers):
        block = vision.vision.layers[i]
        with vision.trace(PROMPT, images=[red, wide]):
            x = block.input.save()
            layer_input = block.layer_input.save()
            normed = block.attention_norm_output.save()
            attention = block.self_attn.attention_output.save()
            mid = block.layer_mid.save()
            mlp_normed = block.mlp_norm_output.save()
            mlp_in = block.mlp_input.save()
            activation = block.mlp.mlp_activation.save()
            neurons = block.mlp.mlp_neurons.save()
            mlp = block.mlp.mlp_output.save()
            out = block.layer_output.save()
        module = native(vision).blocks[i]
        assert x.dim() == 2 and layer_input.shape == (1, *x.shape)
        assert torch.equal(layer_input[0], x)
        assert torch.equal(normed[0], module.norm1(x))
        assert torch.equal(mid, x + attention)
        assert torch.equal(mlp_normed[0], module.norm2(mid[0]))
        assert torch.equal(mlp_in, mlp_normed)
        assert activation.shape == (1, x.shape[0], vision.vision.intermediate_size)
        assert torch.equal(activation[0], module.mlp.act_fn(module.mlp.linear_fc1(mlp_in[0])))
        assert torch.equal(neurons, activation)  # no gate: the down projection takes the activation
        assert torch.equal(mlp[0], module.mlp.linear_fc2(neurons[0]))
        assert torch.equal(x + attention + mlp, out)  # the identity, across [P, H] and [1, P, H]


# -- the projector, the features, the mask, and the forward order -------------------------------------


def test_projector_features_and_mask(vision, red, wide, inputs, sizes):
    last = vision.vision.layers[vision.vision.num_layers - 1]
    with vision.trace(PROMPT, images=[red, wide]):  # the documented order
        mask = vision.vision.image_token_mask.save()
        out = last.layer_output.save()
        fed = vision.projector.input.save()
        merged = vision.projector.output.save()
        tower = vision.vision.tower_output.save()
        features = vision.vision.image_features.save()
        first = vision.layers[0].input.save()
    ids = inputs["input_ids"]
    assert torch.equal(mask, ids == vision._module.config.image_token_id)
    assert mask.dtype == torch.bool and int(mask.sum()) == sum(sizes) // 4
    assert torch.equal(fed, tower[0]) and torch.equal(tower, out)
    assert fed.shape[0] // 4 == mask.sum()
    assert torch.equal(first[mask], features)
    assert torch.equal(features, merged)
    embedded = vision._module.model.language_model.embed_tokens(ids)
    assert torch.equal(first[~mask], embedded[~mask])
    # an edit of the features lands at the image tokens and nowhere else
    with vision.trace(PROMPT, images=[red, wide]):
        vision.vision.image_features = torch.zeros_like(vision.vision.image_features)
        edited = vision.layers[0].input.save()
    assert torch.equal(edited[mask], torch.zeros_like(features))
    assert torch.equal(edited[~mask], first[~mask])
    with pytest.raises(ReadOnly):
        with vision.trace(PROMPT, images=[red, wide]):
            vision.vision.image_token_mask = torch.zeros_like(vision.vision.image_token_mask)
    with pytest.raises(ReadOnly):  # the merger has read the stream before the encoder returns it
        with vision.trace(PROMPT, images=[red, wide]):
            vision.vision.tower_output = torch.zeros_like(vision.vision.tower_output)


def test_forward_order_rule(vision, red, wide):
    with pytest.raises(OutOfOrderError):
        with vision.trace(PROMPT, images=[red, wide]):
            vision.vision.tower_output.save()
            vision.projector.output.save()  # the merger ran before the encoder returned
    with vision.trace(PROMPT, images=[red, wide]):
        out = vision.projector.output.save()
        tower = vision.vision.tower_output.save()
    assert out.shape[0] * 4 == tower.shape[1]


# -- edits ----------------------------------------------------------------------------------


def test_inplace_edit_of_a_vision_layer_output_changes_the_logits(vision, red, wide, inputs, sizes):
    with vision.trace(PROMPT, images=[red, wide]):
        base = vision.logits.save()
    with torch.no_grad():
        plain = vision._module(**inputs).logits
    torch.testing.assert_close(base, plain, rtol=0, atol=0)

    red_rows = slice(0, sizes[0])
    with vision.trace(PROMPT, images=[red, wide]):
        vision.vision.layers[0].layer_output[:, red_rows] = 0  # in place, through the view
        seen = vision.vision.layers[1].input.save()
        edited = vision.logits.save()
    assert torch.equal(seen[red_rows], torch.zeros_like(seen[red_rows]))

    def zero_red(module, args, output):
        output = output.clone()
        output[red_rows] = 0
        return output

    handle = native(vision).blocks[0].register_forward_hook(zero_red)
    try:
        with torch.no_grad():
            hooked = vision._module(**inputs).logits
    finally:
        handle.remove()
    assert not torch.allclose(edited, base)
    torch.testing.assert_close(edited, hooked, rtol=0, atol=0)

    # an assignment in the served layout lands the same way
    with vision.trace(PROMPT, images=[red, wide]):
        out = vision.vision.layers[0].layer_output
        vision.vision.layers[0].layer_output = torch.cat([torch.zeros_like(out[:, red_rows]), out[:, sizes[0]:]], 1)
        assigned = vision.logits.save()
    torch.testing.assert_close(assigned, hooked, rtol=0, atol=0)

    # layer_mid is both norm2's input and the residual: an assignment reaches both
    block = vision.vision.layers[0]
    with vision.trace(PROMPT, images=[red, wide]):
        block.layer_mid = torch.zeros_like(block.layer_mid)
        mlp = block.mlp.mlp_output.save()
        out = block.layer_output.save()
    assert torch.equal(out, mlp)
    torch.testing.assert_close(mlp[0], native(vision).blocks[0].mlp(native(vision).blocks[0].norm2(torch.zeros_like(out[0]))),
                               rtol=0, atol=0)


# -- the text side -----------------------------------------------------------------------------


def test_text_only_prompt_is_the_same_under_both_tasks(model, vision, prompts):
    assert model.attn_implementation == vision.attn_implementation
    for prompt in prompts:
        got = []
        for m in (model, vision):
            with m.trace(prompt):
                heads = m.layers[0].linear_attn.attention_head_outputs.save()
                router = m.layers[1].mlp.router_logits.save()
                attention = m.layers[3].self_attn.attention_output.save()
                out = m.layers[m.num_layers - 1].layer_output.save()
                logits = m.logits.save()
            got.append((heads, router, attention, out, logits))
        for text, wrapper in zip(*got):
            assert torch.equal(text, wrapper)
    # A left-padded batch: the wrapper numbers a text-only row's positions from the padding
    # (no mask-derived positions reach it), which the rotary embedding turns into rounding only.
    got = []
    for m in (model, vision):
        with m.trace(prompts):
            logits = m.logits.save()
        got.append(logits)
    # the text model and the vision-language model on a text-only prompt: rotary positions computed by two code
    # paths, rounding only: one step at the O(1) logits (STEP)
    torch.testing.assert_close(got[0], got[1], rtol=0, atol=1e-5)
    with vision.trace(prompts[0]):
        mask = vision.vision.image_token_mask.save()
    assert not mask.any()


def test_a_batch_of_prompts_with_several_images_each(vision, red, wide):
    batch = [ONE, PROMPT]
    images = [[red], [wide, red]]
    with vision.trace(batch, images=images):
        mask = vision.vision.image_token_mask.save()
        fed = vision.projector.input.save()
        features = vision.vision.image_features.save()
        logits = vision.logits.save()
    assert mask.sum(-1).tolist() == [4, 12]
    assert fed.shape[0] == 16 + 32 + 16
    singles = []
    for prompt, these in zip(batch, images):
        with vision.trace(prompt, images=these):
            f = vision.vision.image_features.save()
            last = vision.logits[:, -1].save()
        singles.append((f, last))
    # each image's features in a batch and alone: the same per-image attention, one step reordered (STEP)
    torch.testing.assert_close(features, torch.cat([f for f, _ in singles]), rtol=1e-5, atol=1e-5)
    for row, (_, last) in enumerate(singles):
        # A padded row and the prompt alone cut the DeltaNet's chunks at other tokens, so they round
        # differently: plain transformers differs by 5e-5 on these O(3) logits; a leak would be O(1).
        torch.testing.assert_close(logits[row, -1], last[0], rtol=1e-4, atol=5e-4)


# -- what the encyclopedia measures with ------------------------------------------------------------


def test_every_vision_value_has_its_layouts_shape(vision, red, wide, inputs, sizes):
    """Each value of a vision host, read alone with the family's trace inputs, has its layout's rank
    and sizes: the image sizes on model.vision, the encoder's (model.vision.dim_sizes) below it."""
    from nncanon.core.processing import image_placeholder
    from nncanon.families import qwen3_5_moe_text as family

    args, kwargs = family.trace_inputs(vision)
    assert image_placeholder(vision.processor) == PAD and args[0].count(PAD) == 2
    assert [image.size for image in kwargs["images"]] == [red.size, wide.size]
    image = family.image_sizes(vision, args, kwargs)
    assert image == {"images": 1, "patches": sum(sizes), "image_tokens": sum(sizes) // 4,
                     "vision_hidden_size": vision.vision.vision_hidden_size}
    text = {**vision.dim_sizes(), "batch": 1, "seq": inputs["input_ids"].shape[1], **image}
    encoder = {**text, **vision.vision.dim_sizes(patches=sum(sizes))}
    assert encoder["num_heads"] != vision.num_heads  # the names do mean other sizes below model.vision
    checked = 0
    for row in vision.support():
        if not row.host.startswith("model.vision") or not row.available:
            continue
        path = row.host[len("model."):].replace("[i]", ".1")
        with torch.no_grad(), vision.trace(*args, **kwargs):
            read = getattr(vision.get(path), row.name).save()
        want = encoder if row.host.startswith("model.vision.layers") else text
        assert [want[d] for d in row.dims] == list(read.shape), (row.host, row.name)
        checked += 1
    assert checked == 20  # every vision value but the two patterns (attention_head_results included)


# -- the full-size printout and the support table -------------------------------------------------


@pytest.fixture(scope="module")
def meta_wrapper(vision):
    from generator.checkpoint.meta_models import meta_model
    from nncanon.families import family_module

    module = meta_model(get_family("qwen3_5_moe_text"), "Qwen/Qwen3.5-35B-A3B-Base")
    # device="meta" keeps the pipeline nnsight builds from moving the weightless module
    return nncanon.wrap(family_module("qwen3_5_moe_text"), module, "image-text-to-text",
                        tokenizer=vision.tokenizer, processor=vision.processor, device="meta")


def test_meta_full_size_printout_matches_the_spec(meta_wrapper):
    lines = repr(meta_wrapper).splitlines()
    start = lines.index("  (vision): Qwen3_5MoeVisionModel(")
    end = lines.index("  (logits) -> Logits [batch seq vocab_size]: The logits the model returns, after "
                      "anything it does past lm_head (a softcap, a scale)")
    # the spec's printout, plus the per-head results nncanon serves beyond it (one line per attention host)
    assert [line for line in lines[start:end] if "(attention_head_results)" not in line] == \
        SPEC_VISION_PRINTOUT.splitlines()
    assert sum("(attention_head_results)" in line for line in lines[start:end]) == 1
    v = meta_wrapper.vision
    assert (v.num_layers, v.vision_hidden_size, v.num_heads, v.head_dim, v.intermediate_size, v.patch_size,
            v.spatial_merge_size, v.window_size) == (27, 1152, 16, 72, 4304, 16, 2, None)


def test_support_table_matches_the_spec(meta_wrapper):
    rows = [(r.host, ("⚠︎" if r.conditional else "") + r.name, r.layout, r.description, r.read_at)
            for r in meta_wrapper.support() if r.host.startswith("model.vision")]
    # the spec's rows in its order, plus the per-head results nncanon serves beyond it (issue 27)
    assert [row for row in rows if row[1] != "attention_head_results"] == SPEC_VISION_SUPPORT
    assert [row[0] for row in rows if row[1] == "attention_head_results"] == ["model.vision.layers[i].self_attn"]


SPEC = Path("/work/shared/spec/000_d93722d68e70e3f9.txt")


@pytest.mark.skipif(not SPEC.is_file(), reason="the spec text is not on this machine")
def test_the_copied_printout_is_the_specs():
    assert SPEC_VISION_PRINTOUT.splitlines() == SPEC.read_text().splitlines()[1340:1395]


# -- copied from the spec: its vision printout (lines 1341-1395) and support tables (lines 200-267) ----------

SPEC_VISION_PRINTOUT = """\
  (vision): Qwen3_5MoeVisionModel(
    (patch_embed): Qwen3_5MoeVisionPatchEmbed(
      (proj): Conv3d(3, 1152, kernel_size=(2, 16, 16), stride=(2, 16, 16))
    )
    (pos_embed): Embedding(2304, 1152)
    (rotary_pos_emb): Qwen3_5MoeVisionRotaryEmbedding()
    (layers/blocks): ModuleList(
      (0-26): 27 x Qwen3_5MoeVisionBlock(
        (input_layernorm/norm1): LayerNorm((1152,), eps=1e-06, elementwise_affine=True, bias=True)
        (post_attention_layernorm/norm2): LayerNorm((1152,), eps=1e-06, elementwise_affine=True, bias=True)
        (self_attn/attn): Qwen3_5MoeVisionAttention(
          (qkv): Linear(in_features=1152, out_features=3456, bias=True)
          (o_proj/proj): Linear(in_features=1152, out_features=1152, bias=True)
          (attention_queries) -> Queries [batch num_heads seq qk_head_dim]: The queries entering attention
          (attention_keys) -> Keys [batch num_kv_heads seq qk_head_dim]: The keys entering attention
          (attention_values) -> Values [batch num_kv_heads seq head_dim]: The values entering attention
          (attention_head_outputs) -> HeadOutputs [batch seq num_heads head_dim]: The per-head outputs before the output projection
          (attention_output) -> Patches [images patches vision_hidden_size]: What the attention adds to the tower's stream
          (attention_premix) -> HeadOutputs [batch seq num_heads head_dim]: Every head's output side by side, as the output projection takes it
          (attention_scores) -> Pattern [batch num_heads query key]: The attention scores entering the softmax, masked
          (attention_probabilities) -> Pattern [batch num_heads query key]: The attention pattern the values are mixed with
        )
        (mlp): Qwen3_5MoeVisionMLP(
          (linear_fc1): Linear(in_features=1152, out_features=4304, bias=True)
          (down_proj/linear_fc2): Linear(in_features=4304, out_features=1152, bias=True)
          (act_fn): GELUTanh()
          (mlp_output) -> Patches [images patches vision_hidden_size]: What the MLP adds to the tower's stream
          (mlp_activation) -> Neurons [batch seq intermediate_size]: The activation function's output
          (mlp_neurons) -> Neurons [batch seq intermediate_size]: What the down projection receives
        )
        (layer_input) -> Patches [images patches vision_hidden_size]: The tower's stream entering the block
        (attention_norm_output) -> Patches [images patches vision_hidden_size]: The normed stream entering the attention
        (layer_mid) -> Patches [images patches vision_hidden_size]: The tower's stream after the attention add
        (mlp_norm_output) -> Patches [images patches vision_hidden_size]: The normed stream entering the MLP
        (mlp_input) -> Patches [images patches vision_hidden_size]: What the MLP is called with
        (layer_output) -> Patches [images patches vision_hidden_size]: The tower's stream leaving the block
      )
    )
    (merger): Qwen3_5MoeVisionPatchMerger(
      (norm): LayerNorm((1152,), eps=1e-06, elementwise_affine=True, bias=True)
      (linear_fc1): Linear(in_features=4608, out_features=4608, bias=True)
      (act_fn): GELU(approximate='none')
      (down_proj/linear_fc2): Linear(in_features=4608, out_features=2048, bias=True)
    )
    (image_token_mask) -> ImageTokenMask [batch seq]: Which positions hold image tokens: input_ids == the config's image_token_id; read-only
    (patch_embeddings) -> Patches [images patches vision_hidden_size]: The patch embedding's output, one row per patch
    (tower_output) -> Patches [images patches vision_hidden_size]: The last block's stream after the tower's final norm, before any pooling or adapter
    (image_features) -> ImageFeatures [image_tokens hidden_size]: The image features the text model receives at the image tokens, flat over them
  )
  (projector): Qwen3_5MoeVisionPatchMerger(
    (norm): LayerNorm((1152,), eps=1e-06, elementwise_affine=True, bias=True)
    (linear_fc1): Linear(in_features=4608, out_features=4608, bias=True)
    (act_fn): GELU(approximate='none')
    (down_proj/linear_fc2): Linear(in_features=4608, out_features=2048, bias=True)
  )"""

SPEC_VISION_SUPPORT = [
    ('model.vision', 'image_token_mask', 'ImageTokenMask [batch seq]', "Which positions hold image tokens: input_ids == the config's image_token_id; read-only", "the model's own inputs, at the root"),
    ('model.vision', 'patch_embeddings', 'Patches [images patches vision_hidden_size]', "The patch embedding's output, one row per patch", "the child module patch_embed's output"),
    ('model.vision', 'tower_output', 'Patches [images patches vision_hidden_size]', "The last block's stream after the tower's final norm, before any pooling or adapter", "the module's own output"),
    ('model.vision', 'image_features', 'ImageFeatures [image_tokens hidden_size]', 'The image features the text model receives at the image tokens, flat over them', "inside model.model's forward: the arguments of inputs_embeds_masked_scatter_0, element 1"),
    ('model.vision.layers[i]', 'layer_input', 'Patches [images patches vision_hidden_size]', "The tower's stream entering the block", "the module's own input"),
    ('model.vision.layers[i]', 'attention_norm_output', 'Patches [images patches vision_hidden_size]', 'The normed stream entering the attention', "the child module input_layernorm's output"),
    ('model.vision.layers[i]', 'layer_mid', 'Patches [images patches vision_hidden_size]', "The tower's stream after the attention add", "the child module post_attention_layernorm's input"),
    ('model.vision.layers[i]', 'mlp_norm_output', 'Patches [images patches vision_hidden_size]', 'The normed stream entering the MLP', "the child module post_attention_layernorm's output"),
    ('model.vision.layers[i]', 'mlp_input', 'Patches [images patches vision_hidden_size]', 'What the MLP is called with', "the child module mlp's input"),
    ('model.vision.layers[i]', 'layer_output', 'Patches [images patches vision_hidden_size]', "The tower's stream leaving the block", "the module's own output"),
    ('model.vision.layers[i].self_attn', 'attention_queries', 'Queries [batch num_heads seq qk_head_dim]', 'The queries entering attention', 'inside the forward: the output of unsqueeze_0'),
    ('model.vision.layers[i].self_attn', 'attention_keys', 'Keys [batch num_kv_heads seq qk_head_dim]', 'The keys entering attention', 'inside the forward: the output of unsqueeze_1'),
    ('model.vision.layers[i].self_attn', 'attention_values', 'Values [batch num_kv_heads seq head_dim]', 'The values entering attention', 'inside the forward: the output of unsqueeze_2'),
    ('model.vision.layers[i].self_attn', '⚠︎attention_scores', 'Pattern [batch num_heads query key]', 'The attention scores entering the softmax, masked', 'inside the forward: the input of nn_functional_softmax_0 inside attention_interface_1'),
    ('model.vision.layers[i].self_attn', 'attention_premix', 'HeadOutputs [batch seq num_heads head_dim]', "Every head's output side by side, as the output projection takes it", "the child module o_proj's input"),
    ('model.vision.layers[i].self_attn', 'attention_output', 'Patches [images patches vision_hidden_size]', "What the attention adds to the tower's stream", "the module's own output"),
    ('model.vision.layers[i].self_attn', '⚠︎attention_probabilities', 'Pattern [batch num_heads query key]', 'The attention pattern the values are mixed with', 'inside the forward: the output of nn_functional_dropout_0 inside attention_interface_1'),
    ('model.vision.layers[i].self_attn', 'attention_head_outputs', 'HeadOutputs [batch seq num_heads head_dim]', 'The per-head outputs before the output projection', 'inside the forward: the output of torch_cat_0'),
    ('model.vision.layers[i].mlp', 'mlp_activation', 'Neurons [batch seq intermediate_size]', "The activation function's output", "the child module act_fn's output"),
    ('model.vision.layers[i].mlp', 'mlp_neurons', 'Neurons [batch seq intermediate_size]', 'What the down projection receives', "the child module down_proj's input"),
    ('model.vision.layers[i].mlp', 'mlp_output', 'Patches [images patches vision_hidden_size]', "What the MLP adds to the tower's stream", "the module's own output"),
]
