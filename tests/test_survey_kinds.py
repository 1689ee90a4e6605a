"""The survey's masked-LM, seq2seq, speech-to-text and CTC model types (generator/survey/encoders.py): the list is
transformers' six, a type with no family is surveyed end to end on its kind's encoder parts and what its row says
holds (or not) is what plain hooks see, and the Coverage page counts each kind (tests/fixtures/survey_kinds)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SURVEY = ROOT / "tests" / "fixtures" / "survey_kinds"
#: one model type of each encoder kind with no family: a masked LM built like BERT (LayoutLM), a pre-norm seq2seq
#: model (M2M-100: BART's post-norm relations must not hold there) and a CTC speech encoder (wav2vec2)
KINDS = {"layoutlm": "masked LM", "m2m_100": "seq2seq", "wav2vec2": "CTC"}


def test_the_model_types_are_transformers_six_lists():
    from transformers.models.auto import modeling_auto as auto

    from generator.survey.kinds import surveyed_as
    from generator.survey.run import model_types

    lists = [auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
             auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES, auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
             auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES, auto.MODEL_FOR_CTC_MAPPING_NAMES]
    every = model_types()
    assert every == sorted(set().union(*lists))
    decoders = set(lists[0]) | set(lists[1])
    assert {t for t in every if surveyed_as(t) == "decoder"} == decoders
    assert surveyed_as("whisper") == "decoder" and surveyed_as("moonshine") == "speech-to-text"
    assert surveyed_as("t5") == "seq2seq" and surveyed_as("hubert") == "CTC" and surveyed_as("albert") == "masked LM"


@pytest.fixture(scope="module")
def surveyed() -> dict[str, dict]:
    """The three rows as the survey caches them: read back where the site build's whole survey (or an earlier run)
    surveyed them under the same key, else surveyed now (run.survey_all)."""
    from generator.survey.run import survey_all, survey_dir

    survey_all(list(KINDS), progress=lambda line: None)
    return {t: json.loads((survey_dir() / f"{t}.json").read_text(encoding="utf-8"))["facts"] for t in KINDS}


def _relation(row: dict, host: str, start: str) -> str | None:
    found = [why for key, why in row["relations"].items() if key.startswith(f"{host}: {start}")]
    assert len(found) == 1, (host, start)
    return found[0]


def _close(a, b) -> bool:
    from nncanon.core.precision import STEP
    from nncanon.core.relations import error

    return error(a, b) <= STEP  # a copy or one add recomputed: one float32 step, the shared relations' own tolerance


def _run_hooked(model_type: str, kind: str, hooks: dict) -> tuple:
    """The survey's tiny model run on the survey's call under plain forward hooks: ``hooks`` maps a module path to
    the key its (input, output) is kept under."""
    import torch
    import transformers

    from generator.survey import encoders
    from generator.survey.kinds import mapping

    cls = getattr(transformers, mapping(kind)[model_type])
    model = encoders.build(model_type, cls, encoders.config(model_type, kind))
    args, kwargs = encoders.inputs(model_type, kind, model)
    seen: dict = {}

    def keep(key):
        def hook(module, args, kwargs, output):  # returns None: the output is kept, never replaced
            seen.setdefault(key, (args[0] if args else next(iter(kwargs.values())), output))
        return hook

    handles = [model.get_submodule(path).register_forward_hook(keep(key), with_kwargs=True)
               for path, key in hooks.items()]
    with torch.no_grad():
        out = model(*args, **kwargs, output_attentions=True)
    for handle in handles:
        handle.remove()
    return seen, out, kwargs


def _bidirectional(probabilities, mask) -> bool:
    """Every real query gives weight to every later real key, and none to a padded key."""
    import torch

    real = mask.bool()
    later = torch.ones(mask.shape[1], mask.shape[1], dtype=torch.bool).triu(1)
    after = later[None, None] & real[:, None, :, None] & real[:, None, None, :]
    padded = real[:, None, :, None] & ~real[:, None, None, :]
    return bool((probabilities[after.expand_as(probabilities)] > 0).all()) and \
        bool((probabilities[padded.expand_as(probabilities)] == 0).all())


def test_each_kind_is_surveyed_end_to_end_on_a_type_with_no_family(surveyed):
    declared = " ".join(line for path in (ROOT / "nncanon" / "families").glob("*.py")
                        for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("MODEL_TYPES"))
    for model_type, row in surveyed.items():
        assert f'"{model_type}"' not in declared  # no family module declares it (what run.pages() reads)
        assert row["kind"] == KINDS[model_type] and KINDS[model_type] in row["tasks"]
        assert row["builds"] and row["forwards"] and row["wraps"] and row["failure"] is None, row["failure"]
        assert sum(v is None for v in row["values"].values()) > len(row["values"]) // 2
        assert any(why is None for why in row["relations"].values())


def test_a_masked_lm_row_is_what_plain_hooks_see(surveyed):
    """LayoutLM's blocks are BERT's: the attention's add and its bidirectional, padding-masked pattern hold there."""
    row = surveyed["layoutlm"]
    hooks = {f"layoutlm.encoder.layer.{i}": f"block{i}" for i in range(4)}
    hooks |= {f"layoutlm.encoder.layer.{i}.attention.output.dense": f"dense{i}" for i in range(4)}
    hooks |= {f"layoutlm.encoder.layer.{i}.attention.output.LayerNorm": f"norm{i}" for i in range(4)}
    seen, out, kwargs = _run_hooked("layoutlm", "masked LM", hooks)
    adds = all(_close(seen[f"block{i}"][0] + seen[f"dense{i}"][1], seen[f"norm{i}"][0]) for i in range(4))
    assert (_relation(row, "model.layers[i]", "layer_input + self_attn.attention_output == layer_mid") is None) == adds
    both = all(_bidirectional(p, kwargs["attention_mask"]) for p in out.attentions)
    assert kwargs["attention_mask"].min() == 0  # a padded row: the pattern's padding is checked, not assumed
    assert (_relation(row, "model.layers[i].self_attn", "attention_probabilities > 0") is None) == both
    assert adds and both


def test_a_pre_norm_seq2seq_row_refuses_the_post_norm_relations_plain_hooks_refute(surveyed):
    """M2M-100 norms before each sublayer: BART's 'the attention reads the stream itself' fails on both stacks, as
    hooks see; its cross-attention reads what the encoder returns (past its final norm), not its last block's output."""
    row = surveyed["m2m_100"]
    hooks = {"model.encoder.layers.0": "enc0", "model.encoder.layers.0.self_attn": "attn0",
             "model.encoder.layers.1": "enc_last", "model.encoder": "encoder",
             "model.decoder.layers.0.encoder_attn.k_proj": "cross_k"}
    seen, out, _ = _run_hooked("m2m_100", "seq2seq", hooks)
    reads_stream = _close(seen["attn0"][0], seen["enc0"][0])
    assert (_relation(row, "model.encoder.layers[i]", "what self_attn is called with == layer_input") is None) \
        == reads_stream
    stack_output = seen["encoder"][1].last_hidden_state
    assert (_relation(row, "model", "decoder.layers[i].cross_attn.encoder_states == encoder.stack_output") is None) \
        == _close(seen["cross_k"][0], stack_output)
    last_block = seen["enc_last"][1][0] if isinstance(seen["enc_last"][1], tuple) else seen["enc_last"][1]
    assert (_relation(row, "model.decoder.layers[i].cross_attn", "encoder_states == model.encoder.layers[-1]")
            is None) == _close(seen["cross_k"][0], last_block)
    assert not reads_stream and _close(seen["cross_k"][0], stack_output)


def test_a_ctc_row_reads_the_samples_and_is_what_plain_hooks_see(surveyed):
    """wav2vec2 (post-norm, no feature-encoder of the parts): its attention reads the block's input itself, as the
    survey says; the call is the feature extractor's samples."""
    row = surveyed["wav2vec2"]
    seen, out, _ = _run_hooked("wav2vec2", "CTC", {"wav2vec2.encoder.layers.0": "block",
                                                   "wav2vec2.encoder.layers.0.attention": "attention"})
    reads_stream = _close(seen["attention"][0], seen["block"][0])
    assert (_relation(row, "model.encoder.layers[i]", "what self_attn is called with == layer_input") is None) \
        == reads_stream
    assert reads_stream and out.logits.shape[0] == 2
    assert row["values"]["model.encoder.layers[i].self_attn.attention_probabilities"] is None


def _kinds_table(page: str) -> dict[str, list[str]]:
    lines = page[page.index("| task |"):].splitlines()[2:]
    return {cells[0]: cells[1:] for line in lines if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}


def test_the_page_counts_each_kind_and_its_family_pages():
    """Each kind's line counts its rows (a type on two lists in both), its family pages as the rows read them, and
    the surveyed rows that take the parts; the task facet counts the same rows."""
    from generator.site.coverage import coverage_context, render_coverage
    from generator.site.render import environment
    from generator.survey.run import load_rows

    index, rows = load_rows(SURVEY)
    page = render_coverage(environment(), SURVEY)
    table = _kinds_table(page)
    context = coverage_context(index, rows)
    facet = dict(next(f["terms"] for f in context["facets"] if f["key"] == "task"))
    for kind in ("causal LM", "masked LM", "seq2seq", "speech-to-text", "CTC"):
        mine = [t for t, kinds in index["tasks"].items() if kind in kinds]
        paged = [t for t in mine if t in index["pages"]]
        assert table[kind][:2] == [str(len(mine)), str(len(paged))], kind
        assert facet[kind] == len(mine)
        for t in paged:
            assert re.search(rf'<tr id="t-{t}" class="nc-row-family-page"', page)
    assert table["seq2seq"][:2] == ["2", "1"]  # t5 with its family page, m2m_100 surveyed
    assert "BERT&#39;s parts" in table["masked LM"][-1] and "Whisper&#39;s parts" in table["speech-to-text"][-1]


def test_a_family_row_finds_the_shared_relations_on_either_stack():
    """An encoder-decoder family's facts state the shared relations on model.encoder.layers[i], model.decoder ...
    (BART's texts, as its build checks them): its row ticks them as a decoder family's on model.layers[i]; a
    relation on another host (a cross-attention's) is not one of them."""
    from generator.site.coverage import verified

    relations = [{"host": "model.encoder.layers[i]", "text": "layer_input + self_attn.attention_output == layer_mid: "
                  "the attention's add, before its norm"},
                 {"host": "model.decoder", "text": "layers[i].layer_output == layers[i+1].layer_input, on every block"},
                 {"host": "model", "text": "lm_head_output == decoder.stack_output @ embed_tokens.weightᵀ"}]
    assert dict(verified({"relations": relations})["shared"]) == {
        "residual decomposition": True, "stack": True, "final norm": False, "head": True}
    crossed = [{"host": "model.decoder.layers[i].cross_attn", "text": relations[0]["text"]}]
    assert dict(verified({"relations": crossed})["shared"])["residual decomposition"] is False
