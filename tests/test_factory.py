"""The factory (issue 47): ``new <family> --from-survey`` writes a family from the survey of its model type, and the
only edits a person must make are the ones it marks. Filled with test values, the family pins, claims and
verifies; bad input is one line."""

from __future__ import annotations

import re

import pytest
import yaml
from test_meaning import MARKER, OLMO_NOTES, copy, run  # noqa: F401  (copy: the module's fixture, a copy of the repository)

pytestmark = pytest.mark.slow

#: a model type served by no family in the copy (the repository's helium family is removed from it first):
#: Llama's tree with its own classes, so the survey's parts hold and the factory's output verifies as written
MODEL_TYPE = "helium"

#: test_meaning's OLMo notes without their OLMo sentence: the block's sum, true of any Llama tree
NOTES = "## The block, in order\n\nEvery block adds what the attention and the MLP give to the stream:\n\n" + \
    OLMO_NOTES.split("\n\n", 2)[2]

#: what a person supplies where the factory left its markers (test values, true of the tiny checkpoint)
FILLED = {
    "lines": ["Helium-1"], "group": "Helium", "tags": ["Pre-norm", "SwiGLU MLP"],
    "tagline": "An RMSNorm, attention, an add, an RMSNorm, a SwiGLU MLP, an add.",
    "checkpoints": [{"id": "test/helium", "printout": True, "config": {
        "architectures": ["HeliumForCausalLM"], "model_type": "helium", "hidden_size": 2560, "intermediate_size": 7040,
        "num_hidden_layers": 24, "num_attention_heads": 20, "num_key_value_heads": 20, "head_dim": 128,
        "vocab_size": 48000, "max_position_embeddings": 4096, "rms_norm_eps": 1.0e-08, "rope_theta": 100000.0,
        "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2}}],
}


def fill_markers(root, family: str) -> list[str]:
    """Make exactly the marked edits, then delete the markers; returns what each marker asked for."""
    asked = []
    module = root / "nncanon" / "families" / f"{family}.py"
    text = module.read_text()
    asked += re.findall(rf"{re.escape(MARKER)} \w+\): (.*)", text)
    text = re.sub(rf'^"""\n{re.escape(MARKER)}.*\n"""', '"""Helium: Llama\'s block on its own classes."""', text,
                  count=1, flags=re.M)
    module.write_text(text)
    path = root / "families" / f"{family}.yaml"
    text = path.read_text()
    asked += re.findall(rf"{re.escape(MARKER)} \w+\): (.*)", text)
    data = yaml.safe_load(text)
    data.update(FILLED)
    data["page"]["config_fields"] = list(FILLED["checkpoints"][0]["config"])
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    notes = root / "families" / f"{family}.notes.md"
    asked += re.findall(rf"{re.escape(MARKER)} \w+\): (.*?) -->", notes.read_text())
    notes.write_text(NOTES)
    return asked


def test_new_from_survey_writes_a_family_that_verifies_once_the_marked_lines_are_filled(copy):  # noqa: F811
    for path in [copy / "nncanon" / "families" / f"{MODEL_TYPE}.py", *(copy / "families").glob(f"{MODEL_TYPE}.*")]:
        path.unlink(missing_ok=True)
    # --like llama: the closest-family match would survey every family's model type first (a minute, cold)
    done = run(copy, f"python -m generator new {MODEL_TYPE} --from-survey --like llama")
    assert done.returncode == 0, done.stderr[-1500:]
    module = (copy / "nncanon" / "families" / f"{MODEL_TYPE}.py").read_text()
    # the survey's findings are written, not left to the person: the classes, the module paths, the recipe
    assert "from transformers.models.helium import modeling_helium as hf" in module
    assert "hf.HeliumDecoderLayer: Block" in module and "build = text_only(hf.HeliumForCausalLM)" in module
    assert "RENAME = TEXT_RENAME" in module and "# Relations still to state" in module
    recipe = yaml.safe_load((copy / "families" / f"{MODEL_TYPE}.yaml").read_text())["tiny"]
    assert recipe["class"] == "HeliumForCausalLM"
    sizes = [recipe["config"][k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                           "num_key_value_heads", "head_dim", "vocab_size")]
    assert len(set(sizes)) == len(sizes), sizes  # every dimension a size of its own
    # unedited, it is refused: its full-size configs are still the template's (a Llama's)
    done = run(copy, f"python -m generator verify {MODEL_TYPE}")
    assert done.returncode == 1 and "checkpoints[0].config.model_type': 'llama'" in done.stderr, done.stderr[-1500:]
    asked = fill_markers(copy, MODEL_TYPE)
    assert {"the lines (model generations) this family covers", "the line the navigation lists it under",
            "the tagline describes the other family"} <= set(asked), asked
    assert not any("transformers" in why or "tiny.class" in why for why in asked), asked
    for step in ("pin", "claims", "verify"):
        done = run(copy, f"python -m generator {step} {MODEL_TYPE}")
        assert done.returncode == 0, f"{step}: {done.stderr[-1500:]}"


@pytest.mark.parametrize("argv, says", [
    ("new nope --from-survey", "--model-type 'nope' is not a model type the installed transformers knows"),
    ("new vit_copy --from-survey --model-type vit", "is on none of transformers"),
    # blt's byte-level stacks are no list of decoder layers the config counts: no tree to mount
    ("new blt --from-survey", "the survey could not mount the generic parts on 'blt'"),
])
def test_new_from_survey_refuses_bad_input_in_one_line(copy, argv, says):  # noqa: F811
    done = run(copy, f"python -m generator {argv}")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-1500:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and says in lines[0], done.stderr
