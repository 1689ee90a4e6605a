"""Each block kind's inside (generator/site/interiors.py): every value of every family page is a diagram part or
listed with why; the order drawn is the order a forward runs (checked against plain PyTorch hooks); and
a diagram whose arrows contradict the measured order fails the build naming the family, kind and parts."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "facts" / "qwen3_5_moe_text.json"


def _rows(facts: dict) -> set[str]:
    return {f"{h['path']}.{v['name']}" for h in facts["hosts"] for v in h["values"]}


@pytest.mark.slow
def test_every_value_on_every_family_page_is_a_part_or_has_a_reason(native_facts):
    from generator.site.render import page_context, render_family

    pages = sorted(Path(native_facts).glob("*.json"))
    assert len(pages) > 20
    for path in pages:
        facts = json.loads(path.read_text())
        context = page_context(facts)
        html = render_family(facts)
        drawn = {}
        for block in context["blocks"]:
            for box in block["diagram"]["wide"]["boxes"] + block["interior"]["boxes"]:
                drawn.setdefault(box.value_row, box.id)
        vision = [d.get("wide", d) for d in (context["vision"] or {}).values() if d]  # a block: its wide drawing
        # an encoder-decoder's stacks are drawn in place of the one chain (generator/site/stacks.py): their wide drawing
        stack = context["stacks"]["drawing"]["wide"] if context["stacks"] else context["chain"]
        for box in stack["boxes"] + [b for d in vision for b in d["boxes"]]:
            drawn.setdefault(box.value_row, box.id)
        reasons = {u["row"]: u["why"] for u in context["undrawn"]}
        for row in _rows(facts):
            assert row in drawn or reasons.get(row), f"{facts['family']}: {row} is neither drawn nor explained"
            if row in drawn:  # a part on the page, with its id and value
                assert f'id="{drawn[row]}"' in html, f"{facts['family']}: {row}'s part {drawn[row]} is not on the page"
        assert not set(reasons) & set(drawn), f"{facts['family']}: a drawn value is also listed as undrawn"
        # every block kind draws its own measured values, nothing else from the sequence left out
        for block in context["blocks"]:
            chips = [b.value_row for b in block["interior"]["boxes"]]
            assert chips == [r for r in block["kind"]["sequence"] if r in _rows(facts)], facts["family"]
            assert chips, f"{facts['family']}: {block['kind']['kind']} has no measured values"


def test_the_measured_order_is_the_order_plain_hooks_see(model):
    """On the DeltaNet block: the mixer finishes before the MLP starts, and in the MLP the shared expert runs
    before the router (Qwen3.5-MoE's order, not the declared one) and both before the mixture returns."""
    from generator.facts.claims import block_of_kind
    from nncanon.families import qwen3_5_moe_text as family_module
    from nncanon.guards.order import block_sequence

    index = int(block_of_kind(model, family_module, "linear_attention").rsplit(".", 1)[-1])
    layer = model._module.model.layers[index]
    seen = []
    modules = {"linear_attn": layer.linear_attn, "shared_expert": layer.mlp.shared_expert,
               "gate": layer.mlp.gate, "mlp": layer.mlp}
    handles = [m.register_forward_hook(lambda *_, n=n: seen.append(n)) for n, m in modules.items()]
    try:
        import torch

        with torch.no_grad():
            model._module(**model.tokenizer("The cat sat on the mat.", return_tensors="pt"))
    finally:
        for h in handles:
            h.remove()
    hooks = list(dict.fromkeys(seen))
    sequence = [f"{h}.{n}" for h, n in block_sequence(model, index)]
    value_of = {"linear_attn": "model.layers[i].linear_attn.attention_output",
                "shared_expert": "model.layers[i].mlp.shared_experts.mlp_output",
                "gate": "model.layers[i].mlp.router_logits", "mlp": "model.layers[i].mlp.mlp_output"}
    assert sorted(hooks, key=lambda n: sequence.index(value_of[n])) == hooks, (hooks, sequence)
    assert hooks.index("shared_expert") < hooks.index("gate")


def _swapped(tmp_path: Path, kind: str, i: int, j: int) -> Path:
    """A copy of families/ whose ``kind`` parts have parts i and j swapped (as tests/test_build.py mutates)."""
    shutil.copytree(REPO / "families", tmp_path / "families")
    path = tmp_path / "families" / "qwen3_5_moe_text.yaml"
    data = yaml.safe_load(path.read_text())
    parts = data["page"]["block_kinds"][kind]["parts"]
    parts[i], parts[j] = parts[j], parts[i]
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


@pytest.mark.parametrize("i,j,first,second", [
    (0, 1, "layers[i].linear_attn", "layers[i].input_layernorm"),
    (2, 3, "layers[i].mlp", "layers[i].post_attention_layernorm"),
])
def test_swapping_two_parts_fails_the_build_naming_them(tmp_path, model, i, j, first, second):
    from generator.facts.claim_error import ClaimError
    from generator.facts.collect import parts
    from generator.recipe.family import load_family
    from generator.site.render import render_family

    facts = json.loads(FIXTURE.read_text())
    render_family(facts)  # the real parts hold
    family = load_family(_swapped(tmp_path, "linear_attention", i, j))
    kind = next(k for k in facts["stack"]["block_kinds"] if k["kind"] == "linear_attention")
    kind["parts"] = parts(family, model, "layers.0", "layers[i]", family.get("page")["block_kinds"]["linear_attention"]
                          ["parts"], "page.block_kinds.linear_attention")
    match = (rf"qwen3_5_moe_text: claim page\.block_kinds\.linear_attention\.parts: the diagram draws "
             rf"{re.escape(first)} → {re.escape(second)}, but the forward produces")
    with pytest.raises(ClaimError, match=match):
        render_family(facts)
