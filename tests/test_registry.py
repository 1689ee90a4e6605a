"""Every registered family, with no family named here: each value read at a module boundary equals what a
plain PyTorch forward hook on that module sees, on a left-padded batch. (What each value means is the
family's relations, which the build checks on every block under every load: tests/test_build.py builds
every family, tests/test_meaning.py shows the build refusing wrong meanings.)"""

from __future__ import annotations

import pytest
import torch

from generator.recipe.family import all_families, get_family

FAMILIES = [f.family for f in all_families()]
PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]
#: views that only reshape the tensor at the boundary (no arithmetic): its elements are the module's
RESHAPES = {"identity", "tokens", "read-only", "images-axis", "heads(head_dim)"}


@pytest.fixture(scope="module", params=FAMILIES)
def model(request):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    return nncanon.load(checkpoint_dir(get_family(request.param)))


def boundary_values(model):
    """(host envoy, value, native module) for every value read at a module's own input or output."""
    from nncanon.core.locators import Tap

    out = []
    for kind in model.host_kinds():
        path = kind.paths[0].removeprefix("model").lstrip(".").replace("[", ".").replace("]", "")
        host = model.get(path) if path else model
        for value in kind.cls.values():
            locator = value.locator
            if locator.ops or isinstance(locator, Tap) or value.view.name not in RESHAPES:
                continue
            if any(not c.holds(model) for c in value.conditions):
                continue
            target = host if locator.module is None else host.get(locator.module)
            out.append((host, value, target._module))
    return out


def tensors(x):
    """Every tensor in a module's (args, kwargs) or output, flattened."""
    if isinstance(x, torch.Tensor):
        return [x.reshape(-1)]
    if isinstance(x, dict) or hasattr(x, "items"):
        return [t for item in x.values() for t in tensors(item)]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in tensors(item)]
    return []


def test_values_at_module_boundaries_equal_plain_hooks(model):
    checked = 0
    for host, value, module in boundary_values(model):
        seen = {}

        def hook(mod, args, kwargs, output, seen=seen, io=value.locator.io):
            seen.setdefault("io", (args, kwargs) if io == "input" else output)

        handle = module.register_forward_hook(hook, with_kwargs=True)
        speech = getattr(model.family_module, "speech_inputs", None)  # a model that takes audio, not text
        args, kwargs = speech(model) if speech is not None else ((PROMPTS,), {})
        try:
            with torch.no_grad(), model.trace(*args, **kwargs):
                got = getattr(host, value.name).save()
        finally:
            handle.remove()
        where = f"{model.family}: {host._std_path}.{value.name}"
        assert isinstance(got, torch.Tensor), f"{where} is a {type(got).__name__}, not a tensor"
        candidates = tensors(seen["io"])
        assert any(c.numel() == got.numel() and torch.equal(c, got.reshape(-1)) for c in candidates), (
            f"{where} is none of the tensors a plain hook sees at {type(module).__name__}'s {value.locator.io}")
        checked += 1
    # 12 on a decoder with an MLP; a state-space stack (mamba2: a norm and a mixer per block) has 11
    assert checked >= 11, f"{model.family}: only {checked} boundary values"


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tiny_tokenizer_follows_its_recipe(family):
    """As saved: the recipe's special tokens at their ids, its BOS (prepended when it has one), eos and pad."""
    from transformers import AutoTokenizer

    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.checkpoint.tiny_tokenizer import tokenizer_kind
    from generator.recipe.family import get_family

    fam = get_family(family)
    kind, recipe = tokenizer_kind(get_family(fam)), fam.tiny["tokenizer"]
    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir(get_family(fam)))
    for token, token_id in recipe["special_tokens"].items():
        assert tokenizer.convert_tokens_to_ids(token) == token_id, token
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (kind.bos, kind.eos, kind.pad)
    ids = tokenizer("Hello world")["input_ids"]
    if kind.cls == "BertTokenizer":  # an encoder's WordPiece: [CLS] ... [SEP], lowercased (its own test below)
        assert (ids[0], ids[-1]) == (tokenizer.cls_token_id, tokenizer.sep_token_id)
        assert tokenizer.decode(ids, skip_special_tokens=True) == "hello world"
    elif kind.cls == "WhisperTokenizer":  # Whisper's prefix, not its BOS: <|startoftranscript|> ... <|endoftext|>
        assert (ids[0], ids[-1]) == (tokenizer.convert_tokens_to_ids("<|startoftranscript|>"), tokenizer.eos_token_id)
    elif kind.bos is not None:
        assert ids[0] == tokenizer.convert_tokens_to_ids(kind.bos)
    else:
        assert ids[0] not in recipe["special_tokens"].values()
    if kind.cls != "BertTokenizer":
        assert tokenizer.decode(ids, skip_special_tokens=True) == "Hello world"
    vocab = fam.tiny["config"].get("text_config", fam.tiny["config"])["vocab_size"]
    assert len(tokenizer) <= vocab


def test_a_wordpiece_tokenizer_frames_pairs_as_bert_does():
    """bert's tiny WordPiece: its special tokens at bert-base-uncased's ids, a pair framed [CLS] A [SEP] B [SEP] with
    token types 0 then 1, padding on the right with [PAD] (0), an unknown character [UNK] (100)."""
    from transformers import AutoTokenizer

    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir(get_family("bert")))
    assert [tokenizer.convert_tokens_to_ids(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0, 100, 101, 102, 103]
    assert tokenizer.convert_ids_to_tokens(1) == "[unused0]"
    pair = tokenizer("The river ran low", "a library")
    ids, types = pair["input_ids"], pair["token_type_ids"]
    first_sep = ids.index(102)
    assert ids[0] == 101 and ids[-1] == 102 and ids.count(102) == 2
    assert set(types[: first_sep + 1]) == {0} and set(types[first_sep + 1:]) == {1}
    batch = tokenizer(["river", "the river ran low"], padding=True)
    assert tokenizer.padding_side == "right" and batch["input_ids"][0][-1] == 0 and batch["attention_mask"][0][-1] == 0
    assert 100 in tokenizer("\u2603")["input_ids"]
