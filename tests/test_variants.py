"""Issue 24: a family's ``variants:``, the extra tiny recipes of the block layouts one model type carries.

A bad entry is one line naming ``variants[i].<field>``; a variant is the family's recipe with its overrides merged
in, pinned in its own entry; its listed checkpoints' layout switches agree with it; a tag without a qualifier must
hold on every layout; the Layouts table comes from the facts alone. Stable LM's 12B variant is the real case: its
tiny checkpoint loads with the parallel block's and the normed heads' hosts.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from generator.facts.claim_error import ClaimError
from generator.recipe.family import get_family, load_family
from generator.recipe.fields import FamilyYamlError
from generator.recipe.variants import merged, rewrite_variant_pin

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "families"


def copy_stablelm(tmp_path: Path) -> Path:
    for name in ("stablelm.yaml", "stablelm.notes.md"):
        shutil.copy(FAMILIES / name, tmp_path / name)
    return tmp_path / "stablelm.yaml"


def mutated(tmp_path: Path, edit) -> Path:
    path = copy_stablelm(tmp_path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    edit(data["variants"][0], data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def one_line_error(path: Path) -> str:
    with pytest.raises(FamilyYamlError) as info:
        load_family(path)
    text = str(info.value)
    assert "\n" not in text, text
    return text


@pytest.mark.parametrize(("edit", "field", "says"), [
    (lambda v, d: v.update(colour="red"), "variants[0]", "colour"),
    (lambda v, d: v.pop("checkpoints"), "variants[0]", "checkpoints"),
    (lambda v, d: v.update(name="12B!"), "variants[0].name", "lowercase"),
    (lambda v, d: d["variants"].append(json.loads(json.dumps(dict(v, checkpoints=["stabilityai/stablelm-2-1_6b"])))), "variants[1].name",
     "also variants[0]"),
    (lambda v, d: v.update(config={}), "variants[0].config", "changes"),
    (lambda v, d: v["config"].update(hidden_size=64), "variants[0].config.hidden_size", "tiny.config's own value"),
    (lambda v, d: v["config"].update(num_hidden_layers=500), "variants[0].config.num_hidden_layers", "exceeds"),
    (lambda v, d: v["config"].update(num_key_value_heads=3), "variants[0].config.num_key_value_heads",
     "does not divide"),
    (lambda v, d: v.update(sha256="abc"), "variants[0].sha256", "hex"),
    (lambda v, d: v.update(checkpoints=["org/unknown"]), "variants[0].checkpoints[0]", "not in this file"),
    (lambda v, d: d["variants"].append(json.loads(json.dumps(dict(v, name="again")))), "variants[1].checkpoints[0]", "one layout"),
])
def test_a_bad_variant_entry_is_one_line_naming_its_field(tmp_path, edit, field, says):
    text = one_line_error(mutated(tmp_path, edit))
    assert f"field '{field}" in text and says in text, text


def test_a_config_key_the_model_type_lacks_is_named_when_the_variant_is_built(tmp_path):
    family = load_family(mutated(tmp_path, lambda v, d: v["config"].update(use_parallel_residul=True)))
    with pytest.raises(FamilyYamlError) as info:
        family.variant("12b")
    text = str(info.value)
    assert "\n" not in text and "variants[0].config.use_parallel_residul" in text and "StableLmConfig" in text, text


def test_an_unknown_variant_name_lists_the_known_ones():
    family = load_family(FAMILIES / "stablelm.yaml")
    with pytest.raises(FamilyYamlError, match="known: 12b"):
        family.variant("7b")


def test_a_variant_is_the_recipe_with_its_overrides_merged_in():
    family = load_family(FAMILIES / "stablelm.yaml")
    variant = family.variant("12b")
    assert variant.family == "stablelm.12b" and variant.base == "stablelm"
    assert variant.tiny["sha256"] == family.variants[0]["sha256"] != family.tiny["sha256"]
    config = variant.tiny["config"]
    assert config["use_parallel_residual"] and config["qk_layernorm"] and config["num_key_value_heads"] == 2
    assert {k: v for k, v in config.items() if k not in family.variants[0]["config"]} == \
           {k: v for k, v in family.tiny["config"].items() if k not in family.variants[0]["config"]}
    # a nested mapping is merged key by key: a variant changes one rope field without restating the rest
    assert merged({"rope": {"theta": 1, "factor": 0.25}, "a": 1}, {"rope": {"theta": 2}}) == \
           {"rope": {"theta": 2, "factor": 0.25}, "a": 1}


def test_pinning_a_variant_rewrites_only_its_line(tmp_path):
    path = copy_stablelm(tmp_path)
    before = path.read_text(encoding="utf-8")
    rewrite_variant_pin(path, 0, "0" * 64)
    after = path.read_text(encoding="utf-8")
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][1].strip() == f'sha256: "{"0" * 64}"', changed
    assert load_family(path).variants[0]["sha256"] == "0" * 64


def test_a_checkpoint_listed_under_the_wrong_layout_fails_naming_the_switch():
    from generator.facts.variants import check_switches

    family = load_family(FAMILIES / "stablelm.yaml")
    check_switches(family)  # the real file: 1.6B sequential, 12B parallel
    wrong = dict(family.raw, variants=[dict(family.variants[0], checkpoints=["stabilityai/stablelm-2-1_6b"])])
    with pytest.raises(ClaimError, match="stablelm-2-1_6b: its config.json sets .*: False but variant '12b'"):
        check_switches(dataclasses.replace(family, raw=wrong))


def _facts(block_main: list[str], block_variant: list[str]) -> dict:
    layout = {"norm": "LayerNorm", "block": block_variant, "attention": ["grouped-query"], "fused": [],
              "attention_bias": False}
    return {"traits": {"norm": "LayerNorm", "block": block_main, "attention": [], "fused": [],
                       "attention_bias": True, "mlp": "gated", "norm_gain": "weight + bias", "checkpoints": {}},
            "relations": [{"text": "x"}], "edits": [1, 2],
            "configs": [{"checkpoint": "a/small", "also": []}, {"checkpoint": "a/big", "also": []}],
            "variants": [{"name": "big", "config": {"parallel": True}, "layout": layout, "checkpoints": ["a/big"],
                          "relations": [{"text": "y"}, {"text": "z"}], "edits": 3}]}


def test_a_tag_without_a_qualifier_holds_on_every_layout_and_with_one_on_some():
    from generator.facts.tags import check_tags

    family = load_family(FAMILIES / "stablelm.yaml")
    # the tags alone: its notes' words are held to the real facts, which these made-up ones are not
    family = dataclasses.replace(family, raw={**family.raw, "notes": None, "vision_notes": None})
    facts = _facts([], ["parallel block"])
    check_tags(dataclasses.replace(family, tags=("Parallel attention and MLP (12B)",), tagline="x"), facts)
    with pytest.raises(ClaimError, match="Parallel attention and MLP"):
        check_tags(dataclasses.replace(family, tags=("Parallel attention and MLP",), tagline="x"), facts)
    with pytest.raises(ClaimError, match="Grouped-query attention"):  # on no layout at all
        check_tags(dataclasses.replace(family, tags=("Grouped-query attention (x)",), tagline="x"),
                   dict(facts, variants=[]))


def test_the_layouts_table_is_read_from_the_facts():
    from generator.site.config_matrix import layouts

    rows = layouts(_facts([], ["parallel block"]))
    assert [(r["name"], r["checkpoints"], r["relations"], r["edits"]) for r in rows] == \
           [("tiny", ["a/small"], 1, 2), ("big", ["a/big"], 2, 3)]
    assert "parallel block" in rows[1]["layout"] and "attention biases" in rows[0]["layout"]
    assert layouts(dict(_facts([], []), variants=[])) is None


def test_the_12b_variant_loads_with_its_layouts_hosts():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    family = load_family(FAMILIES / "stablelm.yaml")
    model = nncanon.load(checkpoint_dir(family.variant("12b")))
    assert type(model.layers[0]).__name__ == "ParallelBlock"
    assert type(model.layers[0].self_attn).__name__ == "NormedHeadsAttention"
    assert not hasattr(model.layers[0]._module, "post_attention_layernorm") or \
        model.layers[0]._module.post_attention_layernorm is None
    main = nncanon.load(checkpoint_dir(get_family(family)))
    assert type(main.layers[0]).__name__ != "ParallelBlock"


def test_opt_350m_loads_post_norm_with_its_projections_and_its_lens_reaches_the_logits():
    import torch

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir

    family = load_family(FAMILIES / "opt.yaml")
    model = nncanon.load(checkpoint_dir(family.variant("350m")))
    assert type(model.layers[0]).__name__ == "OPTPostNormBlock" and type(model).__name__ == "OPT350mStandardModel"
    assert "final_norm_output" not in {row.name for row in model.support() if row.available}
    with model.trace("The cat sat on the mat"):
        embedded = model.token_embeddings.save()
        lens = model.unembed(model.layers[-1].layer_output).save()
        logits = model.logits.save()
    assert embedded.shape[-1] == 24 and lens.shape == logits.shape
    torch.testing.assert_close(lens, logits)  # project_out, no final norm, the tied head: the same computation
    main = nncanon.load(checkpoint_dir(get_family(family)))
    assert type(main).__name__ != "OPT350mStandardModel"


@pytest.mark.parametrize(("family", "texts"), [
    ("stablelm", ("one sum, both sublayers", "q_layernorm(q_proj(input) in heads)")),
    ("opt", ("post-norm, each norm after its add", "project_in(token_embeddings)", "project_out(layers[-1]")),
])
def test_the_verified_facts_prove_every_relation_on_every_block_of_each_variant(family, texts):
    """The facts `generator verify <family>` wrote (collected here when the cache is cold)."""
    from generator.facts.collect import cached_facts

    facts, _ = cached_facts(get_family(family), progress=lambda line: None)
    (variant,) = facts["variants"]
    blocks = set(range(variant["num_layers"]))
    block_relations = [r for r in variant["relations"] if r["host"].startswith("model.layers[")]
    assert block_relations and all(set(r["blocks"]) == blocks for r in block_relations)
    written = json.dumps([r["text"] for r in variant["relations"]])
    assert all(text in written for text in texts), written
    assert variant["edits"] > 0 and set(variant["loads"]) == {"sdpa", "eager"}


def test_the_layouts_tables_transformer_lens_cell_says_agree_differ_or_not_checked_and_why():
    from generator.site.config_matrix import tl_summary

    assert tl_summary({"m::a": {"agreed": True}, "m::b": {"agreed": True}}) == "agree (2 values)"
    assert tl_summary({"m::a": {"agreed": True}, "m::b": {"agreed": False}}) == "differ on b"
    assert tl_summary({"m::a": {"agreed": None, "why": "TransformerLens does not bridge x"}}) == \
        "not checked: TransformerLens does not bridge x"
    assert tl_summary(None).startswith("not checked")


@pytest.mark.skipif(not __import__("generator.facts.tl_names", fromlist=["installed"]).installed(),
                    reason="needs the transformer-lens extra")
def test_transformer_bridge_agrees_on_stablelm_12b_and_cannot_run_opt_350m():
    """Measured: TransformerBridge 4.3 runs Stable LM 2 12B's layout and every mapped value agrees; its OPT adapter
    boots on OPT-350m's but its forward fails (the post-norm block), which the page's cell says."""
    from generator.facts.tl_names import check

    found = check(["stablelm.12b", "opt.350m"])
    assert found["stablelm.12b"] and all(entry["agreed"] for entry in found["stablelm.12b"].values())
    assert all(entry["agreed"] is None and "its forward fails" in entry["why"] for entry in found["opt.350m"].values())
