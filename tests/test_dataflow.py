"""The interiors' dataflow (generator/facts/dataflow.py, generator/site/interiors.py): which values feed which, drawn as
arcs, and checked against the measured order.

Mutations of the fixture's facts (the measured sequence, a dataflow pair) fail the build naming both values;
the page draws every pair as a solid arc and falls back to a dashed one only where no pair feeds a value;
the pairs collect derives on the tiny checkpoint are the ones the relations' equations state (listed here by
hand); and the vision block's measured order is the order plain PyTorch hooks see.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from generator.facts.claim_error import ClaimError

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "facts" / "qwen3_5_moe_text.json"


@pytest.fixture(scope="module")
def facts() -> dict:
    return json.loads(FIXTURE.read_text())


def _kind(facts: dict, kind: str) -> dict:
    return next(k for k in facts["stack"]["block_kinds"] if k["kind"] == kind)


def _swap(rows: list[str], a: str, b: str) -> None:
    i, j = rows.index(a), rows.index(b)
    rows[i], rows[j] = rows[j], rows[i]


def test_swapping_two_values_in_the_measured_sequence_fails_naming_the_relation_edge(facts):
    from generator.site.render import render_family

    render_family(facts)  # the measured facts hold
    mutated = copy.deepcopy(facts)
    kind = _kind(mutated, "linear_attention")
    assert ["model.layers[i].mlp.routed_output", "model.layers[i].mlp.mlp_output"] in kind["dataflow"]
    _swap(kind["sequence"], "model.layers[i].mlp.routed_output", "model.layers[i].mlp.mlp_output")
    match = (r"qwen3_5_moe_text: claim page\.block_kinds\.linear_attention\.parts: the diagram draws "
             r"layers\[i\]\.mlp\.routed_output → layers\[i\]\.mlp\.mlp_output, but the forward produces "
             r"model\.layers\[i\]\.mlp\.mlp_output before model\.layers\[i\]\.mlp\.routed_output")
    with pytest.raises(ClaimError, match=match):
        render_family(mutated)


def test_reversing_a_dataflow_pair_fails_naming_both(facts):
    from generator.site.render import render_family

    mutated = copy.deepcopy(facts)
    flow = _kind(mutated, "full_attention")["dataflow"]
    pair = ["model.layers[i].self_attn.attention_queries", "model.layers[i].self_attn.attention_scores"]
    flow[flow.index(pair)] = pair[::-1]
    match = (r"full_attention\.parts: the diagram draws layers\[i\]\.self_attn\.attention_scores → "
             r"layers\[i\]\.self_attn\.attention_queries, but the forward produces")
    with pytest.raises(ClaimError, match=match):
        render_family(mutated)


def test_a_swap_in_the_vision_blocks_order_fails_naming_both(facts):
    from generator.site.render import render_family

    mutated = copy.deepcopy(facts)
    _swap(mutated["vision"]["sequence"], "model.vision.layers[i].self_attn.attention_values",
          "model.vision.layers[i].self_attn.attention_head_outputs")
    with pytest.raises(ClaimError, match=r"page\.vision\.parts: the diagram draws "
                                         r"vision\.layers\[i\]\.self_attn\.attention_values → "
                                         r"vision\.layers\[i\]\.self_attn\.attention_head_outputs"):
        render_family(mutated)


def test_a_pair_naming_an_unmeasured_value_is_a_one_line_error(facts):
    from generator.site.render import render_family

    mutated = copy.deepcopy(facts)
    _kind(mutated, "full_attention")["dataflow"].append(
        ["model.layers[i].layer_input", "model.layers[i].mlp.mlp_activation"])
    with pytest.raises(ClaimError) as error:
        render_family(mutated)
    message = str(error.value)
    assert "\n" not in message and "full_attention.dataflow" in message
    assert "model.layers[i].mlp.mlp_activation, which the measured sequence lacks" in message
    assert "python -m generator build" in message


def test_every_pair_is_a_solid_arc_and_a_value_no_pair_feeds_a_dashed_one(facts):
    from generator.site.render import render_family

    html = render_family(facts)
    from generator.site.escaping import slug

    kinds = [(_kind(facts, k), f"part-{k}-in") for k in ("linear_attention", "full_attention")]
    kinds.append((facts["vision"], "part-vision-in"))
    arcs = re.findall(r'<path class="nc-edge nc-edge-(\w+)" d="[^"]*" data-from="([^"]+)" data-to="([^"]+)"', html)
    for kind, prefix in kinds:
        def chip(row: str, prefix: str = prefix) -> str:
            return f"{prefix}-{slug(row[len('model.'):])}"

        mine = {(how, a, b) for how, a, b in arcs if a.startswith(prefix + "-")}
        solid = {(chip(a), chip(b)) for a, b in kind["dataflow"]}
        assert {(a, b) for how, a, b in mine if how == "flow"} == solid
        fed = {b for _, b in solid}
        # the chips are the sequence's values the page lists: a dashed arc from each one's predecessor
        ids = [c for c in map(chip, kind["sequence"]) if f'id="{c}"' in html]
        dashed = {(a, b) for a, b in zip(ids, ids[1:]) if b not in fed}
        assert {(a, b) for how, a, b in mine if how == "order"} == dashed
        assert dashed and solid


def test_the_pairs_are_the_ones_the_relations_state(model):
    """On the DeltaNet block, by hand from the relations' equations (nncanon/core/relations.py,
    nncanon/parts/recurrent/deltanet.py, conv.py): the terms on the two sides of each ``==``, both value rows of the block,
    from the one produced first. A root value (attention_mask) or a module's call ({mixer}.input, input)
    makes none; an addend is tied to the sum, not to the other addend."""
    from generator.facts.claims import block_of_kind
    from generator.facts.dataflow import dataflow
    from nncanon.families import qwen3_5_moe_text as family_module
    from nncanon.guards.order import block_sequence

    index = int(block_of_kind(model, family_module, "linear_attention").rsplit(".", 1)[-1])
    rows = [f"{h}.{n}" for h, n in block_sequence(model, index)]
    pairs = {tuple(p) for p in dataflow(model, f"model.layers[{index}]", rows)}
    b, la, mlp = "model.layers[i]", "model.layers[i].linear_attn", "model.layers[i].mlp"
    shared = f"{mlp}.shared_experts"
    kernel = [f"{la}.{n}" for n in ("attention_queries", "attention_keys", "attention_values", "decays", "betas",
                                    "state_input")]
    expected = {
        (f"{b}.layer_input", f"{b}.layer_mid"), (f"{la}.attention_output", f"{b}.layer_mid"),  # the mixer's add
        (f"{b}.layer_mid", f"{b}.layer_output"), (f"{mlp}.mlp_output", f"{b}.layer_output"),  # the MLP's add
        (f"{b}.layer_input", f"{b}.attention_norm_output"),  # == input_layernorm(layer_input)
        (f"{b}.layer_mid", f"{b}.mlp_norm_output"), (f"{b}.layer_mid", f"{b}.mlp_input"),
        (f"{b}.mlp_norm_output", f"{b}.mlp_input"),  # mlp_input == mlp_norm_output == norm(layer_mid)
        # (head outputs, state_output) == gated delta rule(queries, keys, values, decays, betas, from state_input)
        *((k, f"{la}.attention_head_outputs") for k in kernel), *((k, f"{la}.state_output") for k in kernel),
        (f"{la}.attention_head_outputs", f"{la}.attention_output"),  # out_proj(norm(head outputs, gate))
        (f"{la}.time_steps", f"{la}.decays"), (f"{la}.decay_rates", f"{la}.decays"),  # decays == time_steps · rates
        (f"{la}.conv_state_input", f"{la}.conv_state_output"),  # the last columns of [conv_state_input, ...]
        (f"{la}.states", f"{la}.state_output"), (f"{la}.state", f"{la}.states"),  # states[:, -1], states[:, 0]
        # queries, keys, values == act(conv1d([conv_state_input, the conv's input])) split into heads
        *((f"{la}.conv_state_input", f"{la}.{n}") for n in ("attention_queries", "attention_keys", "attention_values")),
        # attention_output recomputed from the values outside the kernel (the conv, time_steps · decay_rates)
        *((f"{la}.{n}", f"{la}.attention_output") for n in ("conv_state_input", "time_steps", "decay_rates")),
        (f"{mlp}.router_logits", f"{mlp}.expert_indices"),  # top_k(softmax(router_logits))
        (f"{mlp}.expert_outputs", f"{mlp}.routed_output"),  # Σ over routing slots
        # routed_output recomputed from the per-expert weights at the router's choice (nncanon/parts/weights.py)
        (f"{mlp}.expert_indices", f"{mlp}.routed_output"), (f"{mlp}.expert_weights", f"{mlp}.routed_output"),
        # and each slot's expert_outputs the same way: the proof chain's link from the router to the slots
        (f"{mlp}.expert_indices", f"{mlp}.expert_outputs"), (f"{mlp}.expert_weights", f"{mlp}.expert_outputs"),
        (f"{mlp}.routed_output", f"{mlp}.mlp_output"), (f"{mlp}.shared_expert_output", f"{mlp}.mlp_output"),
        (f"{shared}.mlp_output", f"{mlp}.shared_expert_output"),  # sigmoid(shared_expert_gate(input)) · it
        (f"{shared}.mlp_activation", f"{shared}.mlp_neurons"), (f"{shared}.mlp_neurons", f"{shared}.mlp_output"),
    }
    # this load (sdpa, the kernel's own route) serves no state nor states: their pairs need both measured
    expected = {p for p in expected if set(p) <= set(rows)}
    assert len(expected) == 41  # 43 less the two of state and states
    assert pairs == expected, (pairs - expected, expected - pairs)
    at = {row: i for i, row in enumerate(rows)}
    assert all(at[a] < at[b] for a, b in pairs)


def test_the_vision_blocks_order_is_the_order_plain_hooks_see(checkpoint):
    """norm1, attn, norm2, mlp of vision block 0 by PyTorch forward hooks on the Hugging Face modules, against
    where the measured sequence puts the values each produces."""
    import torch

    import nncanon
    from nncanon.families import qwen3_5_moe_text as family_module
    from nncanon.guards.order import vision_block_sequence

    vision = nncanon.load(checkpoint, task="image-text-to-text")
    args, kwargs = family_module.trace_inputs(vision)
    rows = [f"{h}.{n}" for h, n in vision_block_sequence(vision, args, kwargs)]
    block = vision._module.model.visual.blocks[0]
    seen: list[str] = []
    handles = [getattr(block, n).register_forward_hook(lambda *_, n=n: seen.append(n))
               for n in ("norm1", "attn", "norm2", "mlp")]
    try:
        with torch.no_grad():
            vision._module(**vision.processor(text=args[0], images=kwargs["images"], return_tensors="pt"))
    finally:
        for h in handles:
            h.remove()
    value_of = {"norm1": "model.vision.layers[i].attention_norm_output",
                "attn": "model.vision.layers[i].self_attn.attention_output",
                "norm2": "model.vision.layers[i].mlp_norm_output", "mlp": "model.vision.layers[i].mlp.mlp_output"}
    assert seen == sorted(seen, key=lambda n: rows.index(value_of[n])) == ["norm1", "attn", "norm2", "mlp"]
    assert rows[0] == "model.vision.layers[i].layer_input" and rows[-1] == "model.vision.layers[i].layer_output"
