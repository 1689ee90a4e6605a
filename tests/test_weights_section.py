"""The family page's Weights section (generator/site/weights_section.py), from facts alone (no torch, no
Chromium): each weight's full-size shape from the printout's dims, the checked relations on its host that name it
(as a word: ``W_O`` is not ``W_O_extra``, ``attention_norm_w`` not ``mlp_norm_w``), its read status, escaping;
and the section's place on a rendered page (tests/fixtures/facts, with weights added)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from generator.site.render import render_family
from generator.site.weights_section import full_shape, proving, rows, weights_section

FIXTURE = Path(__file__).parent / "fixtures" / "facts" / "qwen3_5_moe_text.json"

WEIGHTS = [
    {"host": "model.layers[i].self_attn", "class": "Attention", "blocks": [3],
     "weights": [{"name": "W_K", "dims": "num_kv_heads hidden_size qk_head_dim", "description": "keys",
                  "status": "view", "why": "a view of the parameter: an edit lands in the model"},
                 {"name": "b_K", "dims": "num_kv_heads qk_head_dim", "description": "bias",
                  "status": "none", "why": "the module has no such parameter"}]},
    {"host": "model.layers[i]", "class": "Block", "blocks": [0, 1, 2, 3],
     "weights": [{"name": "attention_norm_w", "dims": "hidden_size", "description": "gain", "status": "computed",
                  "why": "computed by the forward from a parameter: served to read, an edit is refused"},
                 {"name": "W_<bad>", "dims": "", "description": "x", "status": "refused",
                  "why": "its <mechanism> has none"}]},
]
RELATIONS = [
    {"host": "model.layers[i].self_attn", "text": "attention_queries == q and attention_keys == input · W_K + b_K"},
    {"host": "model.layers[i].self_attn", "text": "something with W_K_extra"},
    {"host": "model.layers[i]", "text": "attention_norm_output == rmsnorm(x) · attention_norm_w"},
    {"host": "model.layers[i]", "text": "mlp_norm_output == rmsnorm(x) · mlp_norm_w"},
    {"host": "model", "text": "final_norm_output == attention_norm_w (another host)"},
]


def _facts(base: dict | None = None) -> dict:
    facts = copy.deepcopy(base) if base else {"printout": {"checkpoint": "org/model", "dims": {}}}
    facts["printout"]["dims"] = {"num_kv_heads": 2, "hidden_size": 2048, "qk_head_dim": 256}
    facts["weights"] = copy.deepcopy(WEIGHTS)
    extra = [dict(r, **{"class": "X", "proves": [], "errors": {"sdpa": 0}, "skipped": {}, "blocks": [], "adds": None})
             for r in RELATIONS]  # a page's relation carries these fields too
    facts["relations"] = (facts.get("relations") or []) + (extra if base else copy.deepcopy(RELATIONS))
    return facts


def test_full_shape_is_the_layout_at_the_printout_sizes():
    assert full_shape("num_kv_heads hidden_size qk_head_dim", {"num_kv_heads": 2, "hidden_size": 2048,
                                                               "qk_head_dim": 256}) == "[2, 2048, 256]"
    assert full_shape("num_experts hidden_size", {"hidden_size": 8}) == "[num_experts, 8]"  # unsized stays named
    assert full_shape("", {}) == ""


def test_a_weight_is_proven_by_the_relations_on_its_host_that_name_it():
    assert proving("W_K", "model.layers[i].self_attn", RELATIONS) == [RELATIONS[0]["text"]]
    assert proving("attention_norm_w", "model.layers[i]", RELATIONS) == [RELATIONS[2]["text"]]
    assert proving("W_Q", "model.layers[i].self_attn", RELATIONS) == []


def test_rows_and_the_table():
    table = rows(_facts())
    assert [(r["host"], r["name"], r["shape"], r["status"]) for r in table] == [
        ("model.layers[i].self_attn", "W_K", "[2, 2048, 256]", "view"),
        ("model.layers[i].self_attn", "b_K", "", "none"),  # no such bias: no shape
        ("model.layers[i]", "attention_norm_w", "[2048]", "computed"),
        ("model.layers[i]", "W_<bad>", "", "refused")]
    html = str(weights_section(_facts()))
    assert '<code class="nc-wname">W_&lt;bad&gt;</code>' in html and "its &lt;mechanism&gt; has none" in html  # escaped
    # a fold per host kind, in the facts' order, its summary naming the host (wrapping only before "." and "[")
    assert html.count('<details class="nc-fold nc-weights-fold"') == 2
    assert html.index("model<wbr>.layers<wbr>[i]<wbr>.self_attn") < html.index("model<wbr>.layers<wbr>[i]</code>")
    assert "2 weights" in html
    assert "computed, read-only" in html and "org/model" in html and "blocks 0–3" in html
    assert "no relation names it" not in html  # every view and computed weight here has one
    assert str(weights_section({"printout": {}})) == ""  # facts with no weights: no section


def test_the_section_sits_after_the_relations_and_before_the_printout():
    page = render_family(_facts(json.loads(FIXTURE.read_text(encoding="utf-8"))))
    assert page.index("{ #relations }") < page.index("### Weights { #weights }") < page.index("{ #printout }")
    assert "[2, 2048, 256]" in page
    assert "### Weights" not in render_family(json.loads(FIXTURE.read_text(encoding="utf-8")))
