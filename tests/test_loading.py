"""Loading the real way: hub ids through the Hugging Face cache, meta-first, from a config, device maps, dtypes.

The hub test runs in a fresh process because huggingface_hub reads HF_HOME and HF_HUB_OFFLINE when it is
imported: the process starts with them set, as a user's shell would. Every value is compared with the
same value read off an ordinary load of the checkpoint directory, or with a plain PyTorch hook.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from limits import HANG

from generator.recipe.family import get_family

REPO_ID = "nncanon-tiny/llama"
PROMPT = "The cat sat on the mat because it was warm."

HUB_SCRIPT = textwrap.dedent('''
    import json, sys, torch
    import nncanon
    local_dir, commit, out = sys.argv[1:4]
    found = {}
    model = nncanon.load("nncanon-tiny/llama")
    found["meta_first"] = not model.dispatched and all(p.device.type == "meta" for p in model._module.parameters())
    local = nncanon.load(local_dir)
    # the same rows; their order is measured by a forward, which a meta-first model has not run (nncanon/guards/order.py)
    rows = lambda m: sorted((r.host, r.name, r.available, r.condition or "") for r in m.support())  # noqa: E731
    found["same_support"] = rows(model) == rows(local)
    found["same_printout"] = repr(model) == repr(local)
    with model.trace("The cat sat on the mat"):
        mid = model.layers[1].layer_mid.save()
        logits = model.logits.save()
    with local.trace("The cat sat on the mat"):
        want_mid = local.layers[1].layer_mid.save()
        want_logits = local.logits.save()
    found["dispatched_on_trace"] = model.dispatched
    found["equal"] = torch.equal(mid, want_mid) and torch.equal(logits, want_logits)
    pinned = nncanon.load("nncanon-tiny/llama", revision=commit, dispatch=True)
    found["pinned_loaded"] = pinned.dispatched and pinned.family == "llama"
    for key, args in (("missing", ("nncanon-tiny/nowhere",)), ("bad_revision", ("nncanon-tiny/llama", "v9"))):
        try:
            nncanon.load(args[0], revision=args[1] if len(args) > 1 else None)
        except nncanon.CheckpointError as error:
            found[key] = str(error)
    json.dump(found, open(out, "w"))
''')


@pytest.fixture(scope="module")
def llama_checkpoint():
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family("llama"))


def test_a_hub_id_loads_offline_from_the_cache(tmp_path, llama_checkpoint):
    from nncanon.core.hubcache import lay_out

    snapshot = lay_out(llama_checkpoint, REPO_ID, tmp_path / "hf")
    out = tmp_path / "found.json"
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", HUB_SCRIPT, str(llama_checkpoint), snapshot.name, str(out)],
                          env=env, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert found["meta_first"] and found["same_support"] and found["same_printout"]
    assert found["dispatched_on_trace"] and found["equal"] and found["pinned_loaded"]
    for key in ("missing", "bad_revision"):
        assert "\n" not in found[key] and "offline mode is on (HF_HUB_OFFLINE=1)" in found[key], found[key]
    assert found["missing"].startswith("nncanon-tiny/nowhere is not in the Hugging Face cache")
    assert "at revision 'v9'" in found["bad_revision"]


def test_meta_first_then_dispatch_on_the_first_trace(checkpoint, model, prompts):
    """A hybrid mixture family: the meta tree answers support() and print(model) as the loaded one does,
    and the first trace loads the weights and serves every value the ordinary load serves."""
    import nncanon

    lazy = nncanon.load(checkpoint, dispatch=False)
    assert not lazy.dispatched and all(p.device.type == "meta" for p in lazy._module.parameters())
    # the same rows; the meta tree lists them in declared order until a trace has loaded its weights, the
    # loaded one in the order its forward produces them, which needs a forward (nncanon/guards/order.py)
    rows = lambda m: sorted((r.host, r.name, r.available, r.condition or "") for r in m.support())  # noqa: E731
    assert rows(lazy) == rows(model) and repr(lazy) == repr(model)
    with lazy.trace(prompts):
        state = lazy.layers[0].linear_attn.attention_output.save()
        router = lazy.layers[0].mlp.router_logits.save()
        logits = lazy.logits.save()
    with model.trace(prompts):
        want_state = model.layers[0].linear_attn.attention_output.save()
        want_router = model.layers[0].mlp.router_logits.save()
        want_logits = model.logits.save()
    assert lazy.dispatched and not any(p.device.type == "meta" for p in lazy._module.parameters())
    assert torch.equal(router, want_router) and torch.equal(state, want_state) and torch.equal(logits, want_logits)


def test_a_full_size_config_alone(llama_checkpoint):
    """Llama-3.1-8B's config: its tree and support table with no weights, and a trace says why not."""
    import nncanon
    from generator.recipe.family import get_family

    family = get_family("llama")
    config = family.checkpoint_config(family.checkpoint_ids[0])
    model = nncanon.from_config(config)
    assert all(p.device.type == "meta" for p in model._module.parameters())
    assert model.num_layers == config["num_hidden_layers"] and model.hidden_size == config["hidden_size"]
    assert len(model.layers) == config["num_hidden_layers"]
    assert model.layers[3].mlp._module.down_proj.weight.shape == (config["hidden_size"],
                                                                  config["intermediate_size"])
    assert any(row.name == "attention_output" for row in model.support())
    with pytest.raises(nncanon.CheckpointError, match="built from a config alone"):
        model.dispatch()


def test_an_explicit_device_map_and_bfloat16_pass_through(llama_checkpoint, monkeypatch):
    """device_map and dtype reach from_pretrained unchanged (no GPU here: every module on "cpu")."""
    from transformers import LlamaForCausalLM

    import nncanon

    plain = nncanon.load(llama_checkpoint)
    leaves = {name: "cpu" for name, module in plain._module.named_modules() if name and not list(module.children())}
    asked, original = [], LlamaForCausalLM.from_pretrained.__func__
    monkeypatch.setattr(LlamaForCausalLM, "from_pretrained",
                        classmethod(lambda cls, *a, **k: asked.append(k) or original(cls, *a, **k)))
    mapped = nncanon.load(llama_checkpoint, device_map=leaves)
    # nncanon asks for the loading info itself, to refuse weights that do not load (nncanon/parts/loading.py)
    assert asked == [{"device_map": leaves, "output_loading_info": True}]
    assert all(p.device.type == "cpu" for p in mapped._module.parameters())
    with mapped.trace(PROMPT):
        got = mapped.layers[1].layer_output.save()
    with plain.trace(PROMPT):
        want = plain.layers[1].layer_output.save()
    assert torch.equal(got, want)

    half = nncanon.load(llama_checkpoint, dtype=torch.bfloat16)
    seen = []
    handle = half._module.model.layers[1].register_forward_hook(lambda m, a, out: seen.append(out))
    try:
        with half.trace(PROMPT):
            value = half.layers[1].layer_output.save()
            logits = half.logits.save()
    finally:
        handle.remove()
    out = seen[0][0] if isinstance(seen[0], tuple) else seen[0]
    assert value.dtype == torch.bfloat16 and logits.dtype == torch.bfloat16
    assert torch.equal(value, out)


def test_a_revision_of_a_local_directory_is_refused(llama_checkpoint):
    import nncanon

    with pytest.raises(nncanon.CheckpointError, match="names a version of a hub model") as raised:
        nncanon.load(llama_checkpoint, revision="main")
    assert "\n" not in str(raised.value)


def test_meta_first_vision_wrapper_with_images():
    """Qwen3-VL's wrapper, meta-first with its processor: after the first trace the vision values, DeepStack's
    additions (hooks the family installs on the loaded modules) and the logits equal the ordinary load's."""
    from PIL import Image

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    pad = "<|vision_start|><|image_pad|><|vision_end|>"
    prompt = f"Compare {pad} with {pad}. Which one is red?"
    images = [Image.new("RGB", (64, 64), (255, 0, 0)), Image.new("RGB", (128, 64), (0, 0, 255))]
    directory = checkpoint_dir(get_family("qwen3_vl"))
    got = {}
    for name, dispatch in (("lazy", False), ("loaded", True)):
        model = nncanon.load(directory, task="image-text-to-text", dispatch=dispatch)
        assert model.dispatched is dispatch
        with model.trace(prompt, images=images):
            patches = model.vision.layers[1].layer_output.save()
            deepstack = model.layers[0].deepstack_output.save()
            logits = model.logits.save()
        got[name] = (patches, deepstack, logits)
    assert all(torch.equal(a, b) for a, b in zip(got["lazy"], got["loaded"]))


@pytest.mark.parametrize("family", ["llava", "gemma3", "idefics3", "qwen2_vl"])
def test_a_vision_wrappers_config_alone_loads_for_text_without_its_encoder(family):
    """from_config for text builds what a text load of a checkpoint holds: the wrapper without the modules a text
    prompt never reaches (each line names its own: vision_tower and multi_modal_projector, vision_model and
    connector, visual), and its text stack by the standard names."""
    import nncanon
    from generator.recipe.family import get_family

    found = get_family(family)
    config = found.checkpoint_config(found.checkpoint_ids[0])
    model = nncanon.from_config(config)
    inner = dict(model._module.model.named_children())
    assert not {"vision_tower", "vision_model", "visual", "multi_modal_projector", "connector"} & set(inner), inner
    assert len(model.layers) == model.num_layers > 0


def test_a_meta_build_skips_torchs_inits_but_still_ties_the_head():
    """Full-size printouts are built on the meta device with torch.nn.init's functions doing nothing (they only
    cost time there); the model is the same tree with the same shapes, its head still tied, and the functions
    work again afterwards."""
    import torch.nn.init as init
    from transformers import LlamaConfig, LlamaForCausalLM

    from nncanon.core.loading import no_torch_inits

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    with torch.device("meta"):
        plain = LlamaForCausalLM(config)
    with torch.device("meta"), no_torch_inits():
        fast = LlamaForCausalLM(config)
    assert [(n, p.shape) for n, p in fast.named_parameters()] == [(n, p.shape) for n, p in plain.named_parameters()]
    assert fast.lm_head.weight is fast.model.embed_tokens.weight
    filled = torch.zeros(3)
    init.ones_(filled)
    assert filled.tolist() == [1.0, 1.0, 1.0]
