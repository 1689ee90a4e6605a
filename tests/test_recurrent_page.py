"""The Recurrent state page (generator/site/recurrent.py): every mixer with a state, side by side, from the facts alone.

No torch: the facts are written here in the facts schema's shape (hosts, relations, edits, configs), with the value
names and relation texts the shared parts write (nncanon/parts/recurrent/conv.py, short_conv.py, ssd.py, deltanet.py), and
the committed fixture's facts of a DeltaNet family."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import markdown

from generator.site.recurrent import STATE_VALUES, mixers, summary
from generator.site.render import _env

FIXTURE = Path(__file__).parent / "fixtures" / "facts" / "qwen3_5_moe_text.json"
LOADS = {"eager": "0", "sdpa": "0"}


def _value(name, layout, dims, description="", note=None):
    return {"name": name, "layout": layout, "dims": dims.split(), "description": description, "note": note}


def _facts(family, host_class, native, values, relations=(), edits=(), dims=None, path="model.layers[i].mixer"):
    configs = [{"checkpoint": f"org/{family}-1B", "also": [], "dims": dims}] if dims else []
    return {"family": family, "configs": configs,
            "hosts": [{"path": path, "host_class": host_class, "class": native, "blocks": [0, 1], "values": values}],
            "relations": [{"host": path, "class": host_class, "text": text, "proves": proves.split(), "errors": LOADS}
                          for text, proves in relations],
            "edits": [{"host": path, "class": host_class, "value": v, "reaches": "the next call", "load": "sdpa"}
                      for v in edits]}


CONV_WINDOW = ("conv_state_output == the last conv_kernel columns of [conv_state_input (at a prompt's start: none), the "
               "conv's input], zeros on the left where shorter", "conv_state_input conv_state_output")
SHORT_CONV = _facts(
    "lfm2", "ShortConv", "Lfm2ShortConv",
    [_value("conv_input", "Channels", "batch seq hidden_size"),
     _value("conv_state_input", "ConvState | None", "batch conv_dim conv_kernel", "The conv state entering the layer"),
     _value("conv_state_output", "ConvState", "batch conv_dim conv_kernel", "The conv state leaving the layer",
            note="12 KiB per block in a decode cache on org/lfm2-1B"),
     _value("conv_states", "ConvStates", "batch seq conv_dim conv_kernel", "The conv state after every token")],
    relations=[CONV_WINDOW, ("attention_output == out_proj(output_gates · conv_output)", "attention_output")],
    edits=["conv_state_output"], dims={"hidden_size": 2048, "conv_dim": 2048, "conv_kernel": 3})
SCAN = _facts(
    "mamba2", "SSD", "Mamba2Mixer",
    [_value("decays", "Gates", "batch seq heads"),
     _value("state_output", "State", "batch heads key_dim value_dim", "The recurrent state leaving the layer"),
     _value("states", "States", "batch seq heads key_dim value_dim", "Every token's state"),
     _value("state_input", "State | None", "batch heads key_dim value_dim", "The state entering the layer")],
    relations=[("(attention_head_outputs, state_output) == the recurrence from state_input, token by token: state = "
                "state · exp(decays) + time_steps · attention_values attention_keysᵀ", "state_input state_output"),
               ("decays == time_steps · decay_rates", "decays")],
    edits=["state_output"], dims={"heads": 128, "key_dim": 128, "value_dim": 64})


def test_mixers_are_grouped_by_host_class_with_their_state_values_in_order():
    found = mixers([SHORT_CONV, SCAN])
    assert [m.host_class for m in found] == ["ShortConv", "SSD"]  # by the first family's name: lfm2, mamba2
    scan = found[1].families[0]
    assert [s["name"] for s in scan["states"]] == ["state_input", "states", "state_output"]  # STATE_VALUES' order
    assert "decays" not in [s["name"] for s in scan["states"]]


def test_a_new_mixer_in_the_facts_gets_its_own_row_with_no_change_here():
    """Another family's mixer (a selective scan, its host class unknown to this module) is picked up from its facts."""
    other = _facts("falcon_mamba", "SelectiveScan", "FalconMambaMixer",
                   [_value("state_output", "State", "batch heads key_dim value_dim")],
                   relations=[("state_output == the scan", "state_output")], dims={"heads": 1, "key_dim": 16,
                                                                                  "value_dim": 8192})
    rows = summary(mixers([SCAN, other, SHORT_CONV]))
    assert [r["mixer"] for r in rows] == ["SelectiveScan", "ShortConv", "SSD"]
    assert rows[0]["families"] == ["falcon_mamba"] and rows[0]["native"] == ["FalconMambaMixer"]
    assert mixers([_facts("llama", "Attention", "LlamaAttention", [_value("attention_output", "Residual",
                                                                          "batch seq hidden_size")])]) == []


def test_a_familys_version_of_a_shared_part_joins_the_parts_row():
    """nemotron_h's NemotronSSD is ``host("NemotronSSD", SSD)``: its facts name the part, and its mixer is listed
    under SSD's row beside mamba2's, its own class said on its heading."""
    import copy

    nemotron = copy.deepcopy(SCAN)
    nemotron["family"] = "nemotron_h"
    for h in nemotron["hosts"]:
        h.update(host_class="NemotronSSD", part="SSD", path="model.layers[i].mamba")
    for r in nemotron["relations"] + nemotron["edits"]:
        r.update(host="model.layers[i].mamba", **{"class": "NemotronSSD"})
    found = mixers([SCAN, nemotron, SHORT_CONV])
    assert [m.host_class for m in found] == ["ShortConv", "SSD"]
    ssd = found[1]
    assert [f["family"] for f in ssd.families] == ["mamba2", "nemotron_h"]
    assert ssd.families[1]["host_class"] == "NemotronSSD" and ssd.families[1]["writes"] and ssd.families[1]["cache"]
    assert summary(found)[1]["families"] == ["mamba2", "nemotron_h"]


def test_a_host_classs_part_is_its_furthest_base_short_of_host():
    from generator.facts.measure import part_of
    from nncanon.families import falcon_h1, jamba, nemotron_h
    from nncanon.parts.recurrent.selective_scan import SelectiveScan
    from nncanon.parts.recurrent.ssd import SSD

    assert part_of(nemotron_h.NemotronSSD) == part_of(falcon_h1.FalconSSD) == part_of(SSD) == "SSD"
    assert part_of(jamba.JambaMamba) == part_of(SelectiveScan) == "SelectiveScan"


def test_the_full_size_shape_and_bytes_come_from_each_checkpoints_dims():
    conv = mixers([SHORT_CONV])[0].families[0]
    by_name = {s["name"]: s for s in conv["states"]}
    (size,) = by_name["conv_state_output"]["full_size"]
    assert size["shape"] == ["conv_dim=2048", "conv_kernel=3"] and size["numbers"] == 6144 and size["bytes"] == 24576
    (per_token,) = by_name["conv_states"]["full_size"]  # seq is one token: the same numbers per token
    assert per_token["numbers"] == 6144
    scan = {s["name"]: s for s in mixers([SCAN])[0].families[0]["states"]}
    assert scan["states"]["full_size"][0]["bytes"] == 128 * 128 * 64 * 4
    unsized = _facts("x", "ShortConv", "Lfm2ShortConv", SHORT_CONV["hosts"][0]["values"])
    assert all(not s["full_size"] for s in mixers([unsized])[0].families[0]["states"])  # no dims: no size claimed


def test_writes_decay_and_cache_are_the_proven_relations_and_edits():
    conv, scan = (m.families[0] for m in mixers([SHORT_CONV, SCAN]))
    assert [r["text"] for r in conv["writes"]] == [CONV_WINDOW[0]]  # the output relation proves no state value
    assert conv["decay"] == []
    assert scan["decay"][0]["text"].startswith("decays == time_steps") and scan["decay"][0]["loads"] == ["eager", "sdpa"]
    assert [(c["name"], c["role"]) for c in conv["cache"]] == [("conv_state_input", "reads the cache"),
                                                                 ("conv_state_output", "what the next call starts from")]


def test_the_committed_deltanet_facts_are_on_the_page():
    facts = json.loads(FIXTURE.read_text())
    (mixer,) = mixers([facts])
    assert mixer.host_class == "DeltaNet" and mixer.families[0]["path"] == "model.layers[i].linear_attn"
    assert any("gated delta rule" in r["text"] for r in mixer.families[0]["writes"])
    assert any(c["name"] == "state_output" for c in mixer.families[0]["cache"])


def test_the_page_renders_side_by_side_with_links_and_escaped_relations():
    found = mixers([SHORT_CONV, SCAN])
    page = _env().get_template("recurrent.md.j2").render(mixers=found, summary=summary(found))
    html = markdown.markdown(page, extensions=["tables"])
    assert html.count("<table>") == 3  # the side-by-side table and one per family
    assert '<a href="families/lfm2.md">lfm2</a>' in html and '<a href="families/mamba2.md">mamba2</a>' in html
    assert "24,576" in page and "12 KiB per block in a decode cache" in page
    assert r"state · exp\(decays\)" in page  # the relation's text, escaped for the table-free list
    assert "<li><code>conv_state_output</code>: 12 KiB" in html  # the note is a list, not a table row
    assert "no relation of this mixer proves a decay" in page  # the short convolution's, from the facts


def test_every_state_value_name_is_one_a_shared_part_serves():
    """The names the page looks for are the vocabulary nncanon's parts serve, so none is unreachable."""
    code = ("import sys; from nncanon.families import FAMILIES, family_module; "
            "from generator.site.recurrent import STATE_VALUES; "
            "names = {v.name for n in FAMILIES for h in family_module(n).ENVOYS.values() for v in h.values()}; "
            "missing = [s for s in STATE_VALUES if s not in names]; print(missing); sys.exit(1 if missing else 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]


def test_the_page_module_imports_no_torch():
    code = "import sys, generator.site.recurrent; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
    assert len(set(STATE_VALUES)) == len(STATE_VALUES)
