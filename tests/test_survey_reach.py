"""How far the survey gets (issue 47): a model type stops it only where a reader can say why and what would move it on.

Each cause it used to stop on is fixed where it is general (a composite config's causal LM built from its own
sub-config as transformers' auto class builds it, a per-layer config, a config check that says what it wants, a seq2seq
decoder counted by its decoder layers, no cache, an image for a captioner), each proven here against what
transformers itself says. The Coverage page's count is read from the whole survey's rows (tests/fixtures/
survey_whole.json, written from a survey as its README says), which a live survey of a sample of them must reproduce.
"""

from __future__ import annotations

import inspect
import json
import linecache
import re
import warnings
from pathlib import Path

import pytest

WHOLE = Path(__file__).resolve().parent / "fixtures" / "survey_whole.json"
STOPPED = ("does not build", "does not run", "does not wrap")
#: the issue's bound on the rows the survey cannot take past building, running or wrapping
MOST_STOPPED = 30


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_a_causal_lm_on_a_composite_config_is_built_from_the_sub_config_transformers_picks():
    """Qwen 3.5's causal LM takes the text config, MusicGen's its decoder's: the survey picks what
    AutoModelForCausalLM.from_config picks, and the model it builds runs."""
    import torch
    from transformers import AutoModelForCausalLM

    from generator.survey.measure import build, inputs_for, model_class, own_config
    from generator.survey.shrink import VOCAB, tiny_config

    model = build("qwen3_5")
    with torch.device("meta"):
        auto = AutoModelForCausalLM.from_config(tiny_config("qwen3_5"))
    assert type(model.config) is type(auto.config) is not type(tiny_config("qwen3_5"))
    with torch.no_grad():
        assert model(**inputs_for(model)[1]).logits.shape == (1, 6, VOCAB)
    config = tiny_config("musicgen")
    assert isinstance(own_config(model_class("musicgen"), config), type(config.decoder))


def test_a_per_layer_config_is_shrunk_through_the_sub_configs_it_declares():
    """Gemma 4's text config raises on a global read of a per-layer field: the shrink reads only the sub-configs the
    class declares, and the model it builds is small."""
    import torch

    from generator.survey.measure import MAX_PARAMETERS, model_class
    from generator.survey.shrink import HIDDEN, tiny_config

    config = tiny_config("gemma4")
    assert config.get_text_config().hidden_size == HIDDEN
    with torch.device("meta"):
        model = model_class("gemma4")(config)
    assert sum(p.numel() for p in model.parameters()) <= MAX_PARAMETERS


def test_a_config_check_corrects_the_shrink_as_it_says_and_nothing_else():
    """A check naming what it wants is obeyed, and the config the class then accepts states it: ZAYA keeps its one
    expert per token, Nemotron-H Omni's tower its parent's temporal patch, dots.3's SWA heads the sum it asks for; a
    size its defaults have at 0 stays 0 (GLM-5 Next's RoPE dim: NoPE). A check that names nothing the shrink set
    (Gemma 4 Unified's assistant sharing every layer's cache) stays the row's failure, with its reason."""
    from transformers import CONFIG_MAPPING

    from generator.survey.shrink import HIDDEN, tiny_config

    zaya = tiny_config("zaya")
    assert zaya.hidden_size == HIDDEN and zaya.num_experts_per_tok == CONFIG_MAPPING["zaya"]().num_experts_per_tok
    omni = tiny_config("nemotron_h_omni")
    assert omni.vision_config.video_temporal_patch_size == omni.video_temporal_patch_size
    dots = tiny_config("dots3_note_text")
    assert dots.head_dim == dots.qk_nope_head_dim + dots.qk_rope_head_dim
    glm = tiny_config("glm5_next").get_text_config()
    assert glm.qk_rope_head_dim == CONFIG_MAPPING["glm5_next"]().get_text_config().qk_rope_head_dim == 0
    from generator.survey.measure import survey

    stopped = survey("gemma4_unified_assistant")
    assert not stopped["builds"] and "layer types producing a cache" in stopped["failure"] and stopped["reason"]


def test_a_seq2seq_decoder_runs_without_a_cache_and_is_found_by_its_decoder_layers():
    """Marian's causal LM is its decoder: num_hidden_layers counts the encoder's layers, the stack is decoder_layers
    long; its forward fails on a cache it does not need. Mounted, the generic parts' values resolve on it."""
    from generator.survey.measure import build, inputs_for, survey
    from generator.survey.tree import discover

    model = build("marian")
    assert inputs_for(model)[1]["use_cache"] is False
    tree = discover(model)
    native = next(native for native, standard in tree.rename.items() if standard == "layers")
    assert len(model.get_submodule(native)) == model.config.decoder_layers != model.config.num_hidden_layers
    facts = survey("marian")
    assert facts["wraps"] and facts["values"]["model.layers[i].layer_output"] is None


def test_a_captioner_is_given_the_image_its_forward_requires():
    """BLIP's forward requires pixel_values: a fixed image of its vision config's size, and it runs."""
    import torch

    from generator.survey.measure import build, inputs_for

    model = build("blip")
    assert inspect.signature(model.forward).parameters["pixel_values"].default is inspect.Parameter.empty
    kwargs = inputs_for(model)[1]
    side, patches = model.config.vision_config.image_size, model.vision_model.embeddings.patch_embedding
    assert kwargs["pixel_values"].shape == (1, patches.in_channels, side, side)  # what its patch convolution reads
    with torch.no_grad():
        model(**kwargs)


def test_an_attention_that_repeats_no_keys_is_run_with_a_key_head_per_query_head():
    """Unlimited-OCR's text attention multiplies queries by keys without repeating them: with the shrink's grouped keys
    (2 for 4 query heads) its forward fails; with a key head per query head it runs, and the survey takes it on."""
    import torch

    from generator.survey.measure import build, inputs_for, survey

    grouped = build("unlimited_ocr")
    assert grouped.config.get_text_config().num_key_value_heads < grouped.config.get_text_config().num_attention_heads
    with pytest.raises(RuntimeError, match="must match the size"), torch.no_grad():
        grouped(**inputs_for(grouped)[1])
    text = build("unlimited_ocr", key_per_query=True).config.get_text_config()
    assert text.num_key_value_heads == text.num_attention_heads
    assert survey("unlimited_ocr")["wraps"]


def test_a_block_norm_only_some_blocks_have_and_a_cross_attention_twin_are_not_mounted():
    """RWKV's block 0 alone has pre_ln; TrOCR's decoder layer holds two attentions of one class: neither stops the
    mount now (each was a rename that could not bind)."""
    from generator.survey.measure import build
    from generator.survey.tree import discover

    rwkv = discover(build("rwkv"))
    assert "pre_ln" not in rwkv.rename and set(rwkv.rename.values()) >= {"input_layernorm", "post_attention_layernorm"}
    from generator.survey.measure import survey

    trocr = discover(build("trocr"))
    assert not any(isinstance(key, type) for key, standard in trocr.rename.items() if standard == "self_attn")
    assert "encoder_attn" not in trocr.rename and survey("trocr")["wraps"]


def test_a_class_whose_defaults_build_nothing_is_told_apart_and_the_line_that_raised_is_cited():
    """Qwen 4 (experimental)'s text config leaves its indexer's budget None: unshrunk, its defaults fail too (built
    here on the meta device), so the reason says the shrink is not the cause, and quotes the installed file's line."""
    import torch
    import transformers
    from transformers import CONFIG_MAPPING

    from generator.survey.measure import model_class, survey

    with pytest.raises(TypeError), torch.device("meta"):
        model_class("qwen4_exp_text")(CONFIG_MAPPING["qwen4_exp_text"]())
    facts = survey("qwen4_exp_text")
    assert not facts["builds"] and "from its own defaults either" in facts["reason"], facts["reason"]
    cited = re.search(r"\((transformers/[\w/]+\.py):(\d+): `(.+)`\)", facts["reason"])
    path = Path(transformers.__file__).parent.parent / cited.group(1)
    assert linecache.getline(str(path), int(cited.group(2))).strip() == cited.group(3)


def test_a_required_input_the_survey_does_not_make_is_named():
    from generator.survey.measure import model_class, survey

    facts = survey("pi0")
    required = [name for name, p in inspect.signature(model_class("pi0").forward).parameters.items()
                if p.default is inspect.Parameter.empty and name != "self"]
    assert "state" in required and "`state`" in facts["reason"]


def test_a_model_past_the_parameter_bound_says_a_size_field_is_unknown(monkeypatch):
    """No model type of the locked release is past the bound now: Llama under a bound of 1,000 parameters stands in."""
    from generator.survey import measure

    monkeypatch.setattr(measure, "MAX_PARAMETERS", 1000)
    facts = measure.survey("llama")
    assert facts["failure"].startswith("TooLarge") and "shrink table" in facts["reason"]


def _whole() -> tuple[dict, list[dict]]:
    data = json.loads(WHOLE.read_text(encoding="utf-8"))
    return data["index"], data["rows"]


def test_at_most_30_model_types_stop_the_survey_and_each_says_what_would_move_it_on():
    """The Coverage page's rows that do not build, run or wrap, from the whole survey: at most 30, each with a reason
    rendered on its row (what it quotes set as code)."""
    from generator.site.coverage import coverage_context
    from generator.site.render import environment

    index, rows = _whole()
    context = coverage_context(index, rows)
    stopped = [e for e in context["entries"] if e["kind"] in STOPPED]
    assert len(rows) == len(index["model_types"]) and len(stopped) <= MOST_STOPPED, len(stopped)
    failing = [e for e in context["entries"] if e["failure"] and not e["page"]]
    assert all(e["reason"] for e in failing), [e["model_type"] for e in failing if not e["reason"]]
    page = environment().get_template("coverage.md.j2").render(**context)
    for e in stopped:
        row = re.search(rf'<tr id="t-{re.escape(e["model_type"])}"[^>]*>.*?</tr>', page, re.S).group(0)
        assert '<span class="nc-reason">' in row and "`" not in row.split('class="nc-reason">')[1].split("</span>")[0]


@pytest.mark.parametrize("model_type", ["pi0", "qwen4_exp_text", "marian"])
def test_the_whole_surveys_rows_are_this_survey(model_type):
    """A stopped row of each kind and one the fixes took through: surveyed now, as the fixture has them."""
    from generator.survey.measure import survey

    row = next(r for r in _whole()[1] if r["model_type"] == model_type)
    live = survey(model_type)
    assert {k: live[k] for k in ("builds", "forwards", "wraps", "failure", "reason")} == \
        {k: row[k] for k in ("builds", "forwards", "wraps", "failure", "reason")}


def test_the_coverage_pages_family_rows_are_the_families_index():
    """issue 47: the Coverage page counts a family page for every model type a family serves, and for no other: the
    whole survey's rows with today's families (survey.run.pages, as a live survey writes it into its index) link
    exactly the families the families index lists whose model types the rows survey, one row per model type each
    claims. (The fixture holds the 272 causal and image-text types; t5, mt5 and modernbert serve encoder kinds.)"""
    from generator.recipe.family import all_families
    from generator.site.coverage import coverage_context
    from generator.survey.run import pages

    index, rows = _whole()
    surveyed = {row["model_type"] for row in rows}
    served = {model_type: family for model_type, family in pages().items() if model_type in surveyed}
    context = coverage_context({**index, "pages": served}, rows)
    paged = [e for e in context["entries"] if e["kind"] == "family page"]
    listed = {family.family for family in all_families()}
    assert {e["page"] for e in paged} == set(served.values()) and len(listed - set(served.values())) <= 3
    assert sorted(e["model_type"] for e in paged) == sorted(served) and context["totals"]["pages"] == len(served)
