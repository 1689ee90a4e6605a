"""The tiny pinned checkpoint (generator/checkpoint/checkpoints.py) and the full-size meta builds.

Builds go to a temporary cache (NNCANON_CACHE), so these tests neither read nor write the
repository's build/ directory; every build is from the real family YAML or a copy of it.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import re
import shutil

import pytest
import torch
from PIL import Image

from generator.__main__ import main as cli_main
from generator.checkpoint import checkpoints as C
from generator.checkpoint.meta_models import meta_model
from generator.recipe.family import get_family, load_family
from generator.recipe.fields import REPO_ROOT, FamilyYamlError

FAMILY = "qwen3_5_moe_text"
REPIN = f"python -m generator pin {FAMILY}"


@pytest.fixture(scope="module")
def family():
    return load_family(C.REPO_ROOT / "families" / f"{FAMILY}.yaml")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("nncanon-cache")
    old = os.environ.get("NNCANON_CACHE")
    os.environ["NNCANON_CACHE"] = str(root)
    yield root
    if old is None:
        os.environ.pop("NNCANON_CACHE", None)
    else:
        os.environ["NNCANON_CACHE"] = old


@pytest.fixture(scope="module")
def ckpt(cache, family):
    return C.checkpoint_dir(family)


@pytest.fixture(scope="module")
def tokenizer(ckpt):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ckpt, local_files_only=True)


def _copy_family(family, tmp_path, sha_line):
    """A copy of the family YAML (same file name) whose pin line is replaced."""
    text = family.path.read_text(encoding="utf-8")
    new, n = re.subn(r"(?m)^  sha256: .*$", sha_line, text)
    assert n == 1
    path = tmp_path / family.path.name
    path.write_text(new, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------
# build, cache, pin


def test_build_matches_pin_and_layout(ckpt, cache, family):
    assert family.tiny["sha256"] is not None
    assert ckpt.parent == cache
    assert ckpt.name == f"{FAMILY}-{C.recipe_key(family)}"
    # the pin covers every file of the checkpoint, not only the weights
    assert C.files_digest(C.checkpoint_files(ckpt)) == family.tiny["sha256"]
    for name in (
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "processor_config.json",
    ):
        assert (ckpt / name).is_file(), name
    manifest = json.loads((ckpt / C.MANIFEST_FILE).read_text())
    assert manifest["sha256"] == family.tiny["sha256"]
    assert set(manifest["files"]) == {p.name for p in ckpt.iterdir()} - {C.MANIFEST_FILE}
    # nothing half-written is left beside the finished build
    assert [p.name for p in cache.iterdir()] == [ckpt.name]


def test_cached_build_is_reused(ckpt, family):
    before = (ckpt / "model.safetensors").stat().st_mtime_ns
    assert C.checkpoint_dir(family) == ckpt
    assert (ckpt / "model.safetensors").stat().st_mtime_ns == before


@pytest.mark.parametrize("victim", ["tokenizer.json", "config.json", "model.safetensors"])
def test_a_cached_entry_whose_files_changed_is_rebuilt(family, tmp_path, monkeypatch, victim):
    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path))
    first = C.checkpoint_dir(family)
    original = (first / victim).read_bytes()
    (first / victim).write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    assert C.checkpoint_dir(family) == first
    assert (first / victim).read_bytes() == original


def test_a_pin_mismatch_names_the_capability_and_the_rebuild(family, tmp_path):
    fam = load_family(_copy_family(family, tmp_path, f"  sha256: {'cd' * 32}"))
    with pytest.raises(C.PinMismatch) as info:
        C.checkpoint_dir(fam)
    message = str(info.value)
    for part in (f"CPU capability {C.cpu_capability()}", "every CPU", "--rebuild", "model.safetensors",
                 "tokenizer.json"):
        assert part in message, part


def test_recipe_change_changes_the_directory(family, tmp_path):
    path = family.path.read_text(encoding="utf-8").replace("  seed: 0\n", "  seed: 1\n")
    copy = tmp_path / family.path.name
    copy.write_text(path, encoding="utf-8")
    assert C.recipe_key(load_family(copy)) != C.recipe_key(family)


def test_build_is_byte_deterministic(ckpt, family, tmp_path, monkeypatch):
    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "second"))
    again = C.checkpoint_dir(family, rebuild=True)
    assert again != ckpt
    for name in (
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "config.json",
    ):
        assert (again / name).read_bytes() == (ckpt / name).read_bytes(), name


def test_wrong_pin_raises_with_the_repin_command(family, cache, tmp_path):
    wrong = "ab" * 32
    fam = load_family(_copy_family(family, tmp_path, f"  sha256: {wrong}"))
    with pytest.raises(C.PinMismatch) as info:
        C.checkpoint_dir(fam)
    err = info.value
    assert (err.expected, err.actual) == (wrong, family.tiny["sha256"])
    message = str(err)
    for part in (FAMILY, family.path.name, wrong, family.tiny["sha256"], REPIN):
        assert part in message, part
    # the failed check removed its build and left the good cached one alone
    assert sorted(p.name for p in cache.iterdir()) == [C.cached_dir(family).name]


def test_null_pin_raises_and_cli_reports_it(family, tmp_path, capsys):
    path = _copy_family(family, tmp_path, "  sha256: null")
    with pytest.raises(C.PinMismatch, match=re.escape(REPIN)) as info:
        C.checkpoint_dir(load_family(path))
    assert info.value.expected is None and "null" in str(info.value)
    assert cli_main(["checkpoint", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and REPIN in err


def test_pin_rewrites_only_the_sha256_line(family, tmp_path):
    path = _copy_family(family, tmp_path, "  sha256: null   # filled by pin")
    sha = C.pin(load_family(path))
    assert sha == family.tiny["sha256"]
    expected = family.path.read_bytes().replace(
        f"  sha256: {sha}\n".encode(), f"  sha256: {sha}   # filled by pin\n".encode()
    )
    assert path.read_bytes() == expected
    assert load_family(path).tiny["sha256"] == sha


# ---------------------------------------------------------------------------------------
# loading back, tokenizer, chat template, processor


def test_loads_back_with_identical_logits(ckpt, family, tokenizer):
    from transformers import Qwen3_5MoeForConditionalGeneration

    loaded = Qwen3_5MoeForConditionalGeneration.from_pretrained(ckpt, local_files_only=True).eval()
    built = C.build_model(family)
    assert loaded.dtype == torch.float32
    sd_loaded, sd_built = loaded.state_dict(), built.state_dict()
    assert sd_loaded.keys() == sd_built.keys()
    for key in sd_built:
        assert torch.equal(sd_loaded[key], sd_built[key]), key
    batch = tokenizer(["The river ran low that summer.", "Hello"], return_tensors="pt", padding=True)
    assert batch["attention_mask"][1, 0] == 0  # left padding
    with torch.no_grad():
        a = loaded(**batch).logits
        b = built(**batch).logits
    assert a.shape == (2, batch["input_ids"].shape[1], family.tiny["config"]["text_config"]["vocab_size"])
    assert torch.isfinite(a).all()
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_every_weight_is_random_and_finite(family):
    model = C.build_model(family)
    for name, p in model.named_parameters():
        assert torch.isfinite(p).all(), name
        if p.numel() > 1:
            assert float(p.detach().std()) > 0, name


def test_special_token_ids_as_declared(tokenizer, family):
    from transformers import Qwen3_5Tokenizer

    assert isinstance(tokenizer, Qwen3_5Tokenizer)  # what AutoTokenizer picks for qwen3_5_moe
    declared = family.tiny["tokenizer"]["special_tokens"]
    for token, token_id in declared.items():
        assert tokenizer.convert_tokens_to_ids(token) == token_id, token
        assert tokenizer(token, add_special_tokens=True)["input_ids"] == [token_id], token
    assert len(tokenizer) == family.tiny["tokenizer"]["bpe_vocab_size"] + len(declared)
    assert (
        len(tokenizer) <= family.tiny["config"]["text_config"]["vocab_size"]
    )  # every id has an embedding row
    assert tokenizer.bos_token is None
    assert tokenizer.eos_token == tokenizer.pad_token == "<|endoftext|>"
    ids = tokenizer("Hello world")["input_ids"]
    assert ids[0] < family.tiny["tokenizer"]["bpe_vocab_size"]  # nothing prepended
    assert tokenizer.decode(ids) == "Hello world"


def test_tokenizer_matches_its_fast_backend(ckpt, tokenizer):
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_file=str(ckpt / "tokenizer.json"))
    text = "<|im_start|>user\nCafé, naïve façade — 3.14 apples!<|im_end|>\n<think>\n"
    assert fast(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_chat_template_opens_or_closes_thinking(tokenizer):
    messages = [{"role": "user", "content": "What is 2+2?"}]
    thinking = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    plain = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert thinking == "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert plain.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not thinking.endswith("</think>\n\n")
    no_prompt = tokenizer.apply_chat_template(messages, tokenize=False)
    assert no_prompt == "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"


def test_processor_and_model_on_an_image(ckpt, family):
    from transformers import Qwen2VLImageProcessorPil, Qwen3_5MoeForConditionalGeneration

    from nncanon.core.processing import QwenImageTextProcessor, load_processor

    processor = load_processor(ckpt)
    assert isinstance(processor, QwenImageTextProcessor)
    assert isinstance(processor.image_processor, Qwen2VLImageProcessorPil)
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What color is it?"}]}
    ]
    prompt = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "<|vision_start|><|image_pad|><|vision_end|>What color is it?" in prompt
    image = Image.new("RGB", (64, 64), (255, 0, 0))
    inputs = processor(text=prompt, images=[image], return_tensors="pt")

    cfg = family.tiny["config"]
    assert inputs["image_grid_thw"].tolist() == [[1, 4, 4]]  # 64 px / 16 px patches
    assert inputs["pixel_values"].shape == (16, 3 * 2 * 16 * 16)
    image_tokens = inputs["input_ids"] == cfg["image_token_id"]
    assert int(image_tokens.sum()) == 1 * 4 * 4 // 4  # t*h*w / merge_size**2
    assert torch.equal(inputs["mm_token_type_ids"].bool(), image_tokens)

    model = Qwen3_5MoeForConditionalGeneration.from_pretrained(ckpt, local_files_only=True).eval()
    with torch.no_grad():
        out = model(**inputs)
        text_only = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    assert out.logits.shape == (1, inputs["input_ids"].shape[1], cfg["text_config"]["vocab_size"])
    assert torch.isfinite(out.logits).all()
    # the image reached the model: the logits after the image differ from a run without it
    assert not torch.allclose(out.logits[0, -1], text_only.logits[0, -1])


def test_processor_refuses_videos(ckpt):
    from nncanon.core.processing import load_processor

    with pytest.raises(ValueError, match="torchvision"):
        load_processor(ckpt)(
            text="<|vision_start|><|video_pad|><|vision_end|>", videos=[[Image.new("RGB", (32, 32))] * 2]
        )


# ---------------------------------------------------------------------------------------
# the recipe and the full-size configs


def _recipe_dims(family):
    text = family.tiny["config"]["text_config"]
    vision = family.tiny["config"]["vision_config"]
    return {
        "hidden_size": text["hidden_size"],
        "num_attention_heads": text["num_attention_heads"],
        "num_key_value_heads": text["num_key_value_heads"],
        "head_dim": text["head_dim"],
        "linear_num_key_heads": text["linear_num_key_heads"],
        "linear_num_value_heads": text["linear_num_value_heads"],
        "linear_key_head_dim": text["linear_key_head_dim"],
        "linear_value_head_dim": text["linear_value_head_dim"],
        "num_experts": text["num_experts"],
        "num_experts_per_tok": text["num_experts_per_tok"],
        "moe_intermediate_size": text["moe_intermediate_size"],
        "shared_expert_intermediate_size": text["shared_expert_intermediate_size"],
        "vocab_size": text["vocab_size"],
        "vision.hidden_size": vision["hidden_size"],
        "vision.num_heads": vision["num_heads"],
        "vision.intermediate_size": vision["intermediate_size"],
        "vision.head_dim": vision["hidden_size"] // vision["num_heads"],
        "vision.patch_size": vision["patch_size"],
    }


def _collisions(dims):
    by_value = {}
    for name, value in dims.items():
        by_value.setdefault(value, []).append(name)
    return {v: names for v, names in by_value.items() if len(names) > 1}


def test_recipe_dimensions_are_distinct(family):
    assert _collisions(_recipe_dims(family)) == {}


def test_meta_build_of_35b_a3b(family):
    model = meta_model(family, family.printout_checkpoint)
    assert family.printout_checkpoint == "Qwen/Qwen3.5-35B-A3B-Base"
    params = list(model.parameters())
    assert all(p.device.type == "meta" for p in params)
    n = sum(p.numel() for p in params)
    assert 35.0e9 <= n <= 35.3e9, n
    printed = str(model)
    assert "Embedding(248320, 2048)" in printed
    assert "(0-2): 3 x Qwen3_5MoeDecoderLayer" in printed


def test_every_full_size_checkpoint_builds_on_meta(family):
    from transformers import Qwen3_5MoeConfig

    expected_params = {"Qwen/Qwen3.5-397B-A17B": 396_802_360_816}  # published tensor totals, mtp excluded
    for checkpoint_id in family.checkpoint_ids:
        config = family.checkpoint_config(checkpoint_id)
        assert config["text_config"]["hidden_size"] == config["vision_config"]["out_hidden_size"], (
            checkpoint_id
        )
        assert isinstance(Qwen3_5MoeConfig(**config), Qwen3_5MoeConfig)
        model = meta_model(family, checkpoint_id)
        n = sum(p.numel() for p in model.parameters())
        if checkpoint_id in expected_params:
            assert n == expected_params[checkpoint_id], checkpoint_id
        text = model.config.text_config
        assert text.layer_types.count("full_attention") == text.num_hidden_layers // 4, checkpoint_id
    with pytest.raises(KeyError, match="no checkpoint"):
        meta_model(family, "Qwen/Nope")


def test_build_failure_leaves_nothing(family, tmp_path, monkeypatch):
    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "cache"))

    def boom(fam, directory):
        (directory / "model.safetensors").write_bytes(b"partial")
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(C, "_build_into", boom)
    with pytest.raises(RuntimeError, match="simulated"):
        C.checkpoint_dir(family)
    assert list((tmp_path / "cache").iterdir()) == []


def test_unknown_family_is_a_clear_error():
    from generator.recipe.fields import FamilyYamlError

    with pytest.raises(FamilyYamlError, match="no such family file.*qwen3_5_moe_text"):
        C.checkpoint_dir(get_family("no_such_family"))


def test_a_config_transformers_refuses_is_one_line_naming_the_field(family, tmp_path, capsys):
    text = family.path.read_text(encoding="utf-8").replace("      hidden_size: 40\n", "      hidden_size: -40\n", 1)
    assert "hidden_size: -40" in text
    path = tmp_path / family.path.name
    path.write_text(text, encoding="utf-8")
    for name in ("qwen3_5_moe_text.notes.md", "qwen3_5_moe_text.vision.md"):
        if (family.path.parent / name).exists():
            shutil.copy(family.path.parent / name, tmp_path / name)
    assert cli_main(["checkpoint", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "tiny.config" in err and "Traceback" not in err and "\n" not in err


def test_a_declared_pipeline_puts_special_tokens_at_their_real_ids(tmp_path):
    """Gemma's and Mistral's tokenizers start with <pad>, <eos>, <bos> at 0-2: the recipe says so."""
    import yaml

    llama = load_family(REPO_ROOT / "families" / "llama.yaml")
    data = yaml.safe_load(llama.path.read_text())
    data["tiny"]["tokenizer"] = {
        "kind": "llama3", "bpe_vocab_size": 360,
        "pipeline": {"bos": "<bos>", "eos": "<eos>", "pad": "<pad>", "padding_side": "left"},
        "special_tokens": {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<start_of_turn>": 363, "<end_of_turn>": 364}}
    path = tmp_path / "llama.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    shutil.copy(llama.path.with_name("llama.notes.md"), tmp_path / "llama.notes.md")
    tokenizer = C.build_tokenizer(load_family(path))
    for token, token_id in data["tiny"]["tokenizer"]["special_tokens"].items():
        assert tokenizer.convert_tokens_to_ids(token) == token_id, token
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == ("<bos>", "<eos>", "<pad>")
    ids = tokenizer("Hello world")["input_ids"]
    assert ids[0] == 2 and all(i > 2 for i in ids[1:])
    assert tokenizer.decode(ids, skip_special_tokens=True) == "Hello world"
    assert len(tokenizer) == 365
    data["tiny"]["tokenizer"]["pipeline"]["split"] = "gpt2"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(FamilyYamlError, match=r"tiny\.tokenizer\.pipeline\.split.*'gpt2' is none of"):
        load_family(path)
