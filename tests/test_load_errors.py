"""`nncanon.load` on bad input gives one clear error, and a load says what it runs.

Each bad checkpoint is a `CheckpointError` (a ValueError) naming the file, the problem and the fix,
raised before transformers is asked anything; an implementation transformers refuses is an
`ImplementationError` naming the family and what it supports.
"""

from __future__ import annotations

import json

import pytest

from generator.recipe.family import get_family


def no_transformers_frames(raised) -> bool:
    return all("transformers" not in str(entry.path) for entry in raised.traceback)


def raises_checkpoint_error(path, match: str):
    import nncanon

    with pytest.raises(nncanon.CheckpointError, match=match) as raised:
        nncanon.load(path)
    assert isinstance(raised.value, ValueError)
    assert "\n" not in str(raised.value)
    assert raised.value.__context__ is None or raised.value.__suppress_context__
    assert no_transformers_frames(raised)
    return raised.value


def write_config(tmp_path, text: str):
    (tmp_path / "config.json").write_text(text)
    return tmp_path


def test_a_path_that_does_not_exist(tmp_path):
    missing = tmp_path / "nowhere"
    message = str(raises_checkpoint_error(missing, "no such file or directory"))
    assert str(missing) in message and "local checkpoint directory" in message


def test_a_file_not_a_directory(tmp_path):
    file = write_config(tmp_path, "{}") / "config.json"
    raises_checkpoint_error(file, "is a file, not a directory")


def test_a_directory_without_config_json(tmp_path):
    raises_checkpoint_error(tmp_path, r"no config.json")


def test_invalid_json(tmp_path):
    write_config(tmp_path, '{"model_type": "llama",,}')
    message = str(raises_checkpoint_error(tmp_path, r"config.json is not valid JSON \(.* at line 1, column \d+\)"))
    assert str(tmp_path / "config.json") in message and "replace it" in message


def test_a_json_list(tmp_path):
    write_config(tmp_path, json.dumps([{"model_type": "llama"}]))
    raises_checkpoint_error(tmp_path, r"config.json holds a JSON list, not an object")


def test_no_model_type(tmp_path):
    write_config(tmp_path, json.dumps({"hidden_size": 8}))
    message = str(raises_checkpoint_error(tmp_path, r"config.json has no model_type"))
    assert "qwen3_moe" in message and "llama" in message  # the model types nncanon knows


def test_a_text_config_that_is_not_an_object(tmp_path):
    write_config(tmp_path, json.dumps({"model_type": "qwen3_vl", "text_config": "qwen3"}))
    raises_checkpoint_error(tmp_path, r"text_config is a JSON str, not an object")


def test_a_model_type_with_no_family(tmp_path):
    import nncanon
    from nncanon.families import UnknownFamily

    write_config(tmp_path, json.dumps({"model_type": "xlnet"}))  # a permutation LM: no family serves it
    error = raises_checkpoint_error(tmp_path, r"model_type 'xlnet' has no nncanon family; nncanon serves .*llama")
    assert isinstance(error, nncanon.UnsupportedModelType) and isinstance(error, UnknownFamily)


# -- what a load runs --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_checkpoint():
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family("llama"))


def test_a_load_says_which_implementations_it_runs(llama_checkpoint):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    assert nncanon.load(llama_checkpoint).implementations == {"attn_implementation": "sdpa"}
    eager = nncanon.load(llama_checkpoint, attn_implementation="eager")
    assert eager.implementations == {"attn_implementation": "eager"} and eager.experts_implementation is None
    moe = checkpoint_dir(get_family("qwen3_moe"))
    assert nncanon.load(moe).implementations == {"attn_implementation": "sdpa", "experts_implementation": "grouped_mm"}
    assert nncanon.load(moe, experts_implementation="eager").experts_implementation == "eager"


def test_an_eager_only_model_is_labelled_eager(llama_checkpoint, monkeypatch):
    """transformers loads a model without sdpa support eager by default; asking for sdpa is a one-line error."""
    from transformers import LlamaForCausalLM

    import nncanon

    monkeypatch.setattr(LlamaForCausalLM, "_supports_sdpa", False)
    model = nncanon.load(llama_checkpoint)
    assert model.attn_implementation == "eager"
    assert model.implementations == {"attn_implementation": "eager"}
    with pytest.raises(nncanon.ImplementationError) as raised:
        nncanon.load(llama_checkpoint, attn_implementation="sdpa")
    assert str(raised.value) == ("llama (LlamaForCausalLM) does not support attn_implementation='sdpa'; "
                                 "it supports 'eager', 'flash_attention_2', 'flex_attention'")
    assert isinstance(raised.value, ValueError) and no_transformers_frames(raised)


def test_an_unknown_or_inapplicable_implementation(llama_checkpoint):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    with pytest.raises(nncanon.ImplementationError, match=r"^llama \(LlamaForCausalLM\) does not support "
                                                          r"attn_implementation='sdp'; it supports 'eager', 'sdpa'"):
        nncanon.load(llama_checkpoint, attn_implementation="sdp")
    with pytest.raises(nncanon.ImplementationError, match=r"experts_implementation='grouped_mm'; it has no experts"):
        nncanon.load(llama_checkpoint, experts_implementation="grouped_mm")
    with pytest.raises(nncanon.ImplementationError, match=r"^qwen3_moe \(Qwen3MoeForCausalLM\) does not support "
                                                          r"experts_implementation='fused'; it supports 'eager', .*"
                                                          r"'grouped_mm'"):
        nncanon.load(checkpoint_dir(get_family("qwen3_moe")), experts_implementation="fused")


def _copy(tmp_path, directory, edit):
    import shutil

    copy = tmp_path / "ckpt"
    shutil.copytree(directory, copy)
    edit(copy)
    return copy


def test_a_missing_size_is_named_by_the_model_types_own_field(tmp_path):
    """Falcon sizes its MLP by ffn_hidden_size (it has no intermediate_size): the error names the field its
    config.json lacks, not Llama's."""
    import json

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.families import CheckpointError

    def no_ffn(d) -> None:
        config = json.loads((d / "config.json").read_text())
        del config["ffn_hidden_size"]  # the default, 4 · hidden_size, is not the tiny's 88
        (d / "config.json").write_text(json.dumps(config))

    with pytest.raises(CheckpointError) as caught:
        nncanon.load(_copy(tmp_path, checkpoint_dir(get_family("falcon")), no_ffn))
    said = str(caught.value)
    assert "ffn_hidden_size missing" in said and "intermediate_size" not in said and "\n" not in said, said
