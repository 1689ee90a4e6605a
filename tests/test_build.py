"""The encyclopedia's build: claims that do not hold fail it naming the claim, a malformed family
YAML fails it naming file and field, a failed build leaves the previous site, two builds are
byte-identical, and a warm rebuild collects nothing.

The builds here are of a sample of the families, one of each kind of page (:data:`SAMPLE`): what they prove is the
pipeline's, not a family's, and every family's page is built by ``make site``, which CI runs, and by the site the
``site`` fixture builds whole (tests/test_site_index.py)."""

from __future__ import annotations

import filecmp
import os
import shutil
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
FAMILY = "qwen3_5_moe_text"

pytestmark = pytest.mark.slow
#: a text decoder, the reference page (hybrid recurrent-attention MoE with a vision tower), three image-text families
#: (gemma3's and paligemma's masks with image spans), an encoder-decoder, an encoder, a selective scan, a speech
#: model and a family with variants
SAMPLE = {"llama", FAMILY, "gemma3", "paligemma", "llava", "t5", "bert", "mamba", "whisper", "opt"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, native_facts):
    """A copy of families/ and a private build directory, so the tests never touch the repo's cache."""
    root = tmp_path_factory.mktemp("build")
    shutil.copytree(REPO / "families", root / "families",  # the sample's YAML and notes, and the shared notes
                    ignore=lambda directory, names: [n for n in names if Path(directory).name == "families"
                                                     and "." in n and n.split(".")[0] not in SAMPLE])
    saved = {k: os.environ.get(k) for k in ("NNCANON_FAMILIES", "NNCANON_BUILD")}
    os.environ["NNCANON_FAMILIES"] = str(root / "families")
    os.environ["NNCANON_BUILD"] = str(root / "build")
    # start from the run's facts (collected once, tests/conftest.py), so the module does not collect again
    (root / "build" / "facts").mkdir(parents=True)
    for path in [native_facts / f"{family}{suffix}" for family in SAMPLE for suffix in (".json", ".key")]:
        shutil.copy(path, root / "build" / "facts")  # the facts and the key they were collected under
    recipes = native_facts.parent / "docs_run" / "recipes"  # and the Recipes page's runs, kept beside them
    if recipes.is_dir():
        shutil.copytree(recipes, root / "build" / "docs_run" / "recipes")
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def built(workspace):
    from generator.build import build

    site = workspace / "site"
    FIRST_BUILD["collected"] = build(site=site, progress=lambda line: None)
    return site


#: what the module's first build collected (its ``built`` fixture)
FIRST_BUILD: dict[str, list[str]] = {}


def test_warm_rebuild_collects_nothing_and_is_byte_identical(workspace, built):
    from generator.build import build

    # the run's facts were collected from the repository's families/; a copy of it keys the same facts
    assert FIRST_BUILD["collected"] == [], "a build from a copy of families/ collected again"
    again = workspace / "site2"
    collected = build(site=again, progress=lambda line: None)
    assert collected == []
    comparison = filecmp.dircmp(built, again)
    assert _identical(comparison), "two builds differ"
    assert (built / "families" / FAMILY / "index.html").exists()
    assert (built / "facts" / f"{FAMILY}.json").exists() and (built / "llms.txt").exists()


def _identical(comparison: filecmp.dircmp) -> bool:
    _, mismatch, errors = filecmp.cmpfiles(comparison.left, comparison.right, comparison.common_files, shallow=False)
    if mismatch or errors or comparison.left_only or comparison.right_only:
        return False
    return all(_identical(sub) for sub in comparison.subdirs.values())


def mutated(workspace: Path, edit) -> Path:
    """A copy of the family YAML with ``edit`` applied to its parsed data, in its own directory."""
    directory = workspace / f"mutant-{len(list(workspace.glob('mutant-*')))}"
    shutil.copytree(workspace / "families", directory)
    path = directory / f"{FAMILY}.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def facts(workspace: Path) -> dict:
    import json

    return json.loads((workspace / "build" / "facts" / f"{FAMILY}.json").read_text())


def test_malformed_yaml_fails_naming_file_and_field_and_keeps_the_site(workspace, built):
    from generator.build import build
    from generator.recipe.fields import FamilyYamlError

    path = mutated(workspace, lambda data: data.pop("tagline"))
    before = {p: p.read_bytes() for p in built.rglob("*") if p.is_file()}
    os.environ["NNCANON_FAMILIES"] = str(path.parent)
    try:
        with pytest.raises(FamilyYamlError, match=rf"{FAMILY}\.yaml: field 'tagline': missing"):
            build(site=built, progress=lambda line: None)
    finally:
        os.environ["NNCANON_FAMILIES"] = str(workspace / "families")
    assert {p: p.read_bytes() for p in built.rglob("*") if p.is_file()} == before


def claims_of(data: dict, host: str, name: str) -> dict:
    return data["claims"]["values"][host][name]


@pytest.mark.parametrize("kind,edit,match", [
    ("layout", lambda d: claims_of(d, "model.layers[i].mlp", "router_logits").update(
        layout="Logits [batch seq num_experts]"), r"router_logits layout"),
    ("dimension", lambda d: claims_of(d, "model.layers[i].mlp", "expert_weights").update(
        layout="ExpertWeights [batch seq num_experts]"), r"expert_weights layout"),
    ("read at", lambda d: claims_of(d, "model.layers[i]", "layer_mid").update(
        read_at="the child module mlp's input"), r"layer_mid read at"),
])
def test_a_wrong_value_claim_fails_naming_it(workspace, built, kind, edit, match):
    from generator.facts.claims import check_value_claims
    from generator.facts.collect import ClaimError
    from generator.recipe.family import load_family

    family = load_family(mutated(workspace, edit))
    with pytest.raises(ClaimError, match=match):
        check_value_claims(family, facts(workspace)["hosts"])


def test_a_wrong_identity_fails_naming_it(workspace, built, checkpoint):
    from generator.facts.claims import check_identities
    from generator.facts.collect import PROMPTS, ClaimError
    from generator.facts.loads import resolve_loads
    from generator.recipe.family import load_family
    from nncanon.families import qwen3_5_moe_text as module

    def drop_the_mlp(data):
        data["claims"]["identities"][0]["expr"] = "layers[i].input + linear_attn.attention_output == layer_output"

    family = load_family(mutated(workspace, drop_the_mlp))
    models = resolve_loads(family, module, checkpoint)
    with pytest.raises(ClaimError, match=r"identity 'layers\[i\].input \+ linear_attn.attention_output"):
        check_identities(family, models, module, PROMPTS)


def test_a_wrong_diagram_part_fails_naming_it(workspace, built, model):
    from generator.facts.collect import ClaimError, parts
    from generator.recipe.family import load_family

    def misplace(data):
        data["page"]["block_kinds"]["linear_attention"]["parts"][1] = ["linear_attn", "self_attn.attention_output"]

    family = load_family(mutated(workspace, misplace))
    spec = family.get("page")["block_kinds"]["linear_attention"]
    with pytest.raises(ClaimError, match=r"page.block_kinds.linear_attention.parts\[1\]"):
        parts(family, model, "layers.0", "layers[i]", spec["parts"], "page.block_kinds.linear_attention")


def test_a_tag_the_traits_contradict_fails_naming_it(workspace, built):
    import json

    from generator.facts.collect import ClaimError
    from generator.facts.traits import check_tags
    from generator.recipe.family import load_family

    directory = workspace / "mutant-tags"
    shutil.copytree(workspace / "families", directory)
    path = directory / "llama.yaml"
    data = yaml.safe_load(path.read_text())
    data["tags"].append("Mixture of experts")  # llama's MLP is dense
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    llama = json.loads((workspace / "build" / "facts" / "llama.json").read_text())
    check_tags(load_family(workspace / "families" / "llama.yaml"), llama)  # the real tags hold
    with pytest.raises(ClaimError, match="tag 'Mixture of experts': needs a mixture MLP"):
        check_tags(load_family(path), llama)


def test_a_mask_with_both_ways_spans_is_proven_on_a_call_that_has_them(workspace):
    """gemma3's image spans and paligemma's prefix exist only in a call with images (token_type_ids): the relation
    proving attention_allowed ran under the eager image load, not only on text prompts where the mask is causal."""
    import json

    for family in ("gemma3", "paligemma"):
        data = json.loads((workspace / "build" / "facts" / f"{family}.json").read_text())
        proving = [r for r in data["relations"] if "attention_allowed" in r["proves"]]
        assert proving and all("image eager" in r["errors"] for r in proving), (family, proving)
        assert data["stack"]["marked"] and data["stack"]["marked"][0]["value"].endswith("attention_allowed")


def test_every_read_line_is_in_a_modeling_file_of_its_own_family(native_facts):
    """A value read inside a forward names the line of transformers' source it is read at; the file must be one
    the family's own module classes come from. (nnsight memoizes instrumented code by code object, and a copied
    eager_attention_forward at the same line of two modeling files compares equal: collected in one process after
    lfm2, qwen3_vl_moe's attention scores were said to be read in modeling_lfm2.py.)"""
    import importlib
    import inspect
    import json

    wrong = []
    for path in sorted(native_facts.glob("*.json")):
        facts = json.loads(path.read_text(encoding="utf-8"))
        module = importlib.import_module(facts["module"])  # the family's module, as its YAML named it
        own = {Path(inspect.getfile(cls)).name for cls in module.ENVOYS if isinstance(cls, type)}
        for host in facts["hosts"]:
            for value in host["values"]:
                line = value.get("read_line")
                if line and line["file"].startswith("modeling_") and line["file"] not in own:
                    wrong.append(f"{facts['family']}: {host['path']}.{value['name']} in {line['file']}")
    assert not wrong, "\n".join(wrong)
