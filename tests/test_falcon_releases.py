"""Falcon's read points per transformers release (issue 50): 5.25 moved FalconAttention onto the shared attention
interface, so the family picks each layout's attention host by the installed release. These run under the locked
release: the choice is tested on release numbers, the 5.25 hosts' read points against the YAML's claims for 5.25,
their relations against the locked release's (none dropped), and the 5.25 relations on tensors split as 5.25's
forward splits them (transcribed from its modeling_falcon.py) on the tiny checkpoints' own modules.
``python -m generator verify falcon`` under 5.25 proves them on its forward.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from packaging.version import Version
from transformers.models.falcon import modeling_falcon as hf

from nncanon.families import falcon

ROOT = Path(__file__).resolve().parents[1]
LAYOUTS = ("7b", "40b", "rw")


@pytest.mark.parametrize(("release", "interface"), [("5.23.0", False), ("5.24.0", False), ("5.24.9", False),
                                                    ("5.25.0", True), ("5.25.0.dev0", True), ("5.26.1", True),
                                                    ("6.0.0", True)])
def test_the_release_picks_the_read_points(release, interface):
    assert falcon.on_interface(release) is interface
    assert falcon.attentions(release) is (falcon.INTERFACE if interface else falcon.SPLIT_HEADS)


def test_the_installed_release_picks_every_layouts_host():
    import transformers

    hosts = falcon.INTERFACE if Version(transformers.__version__).release >= (5, 25) else falcon.SPLIT_HEADS
    assert falcon.attentions() is hosts and falcon.ENVOYS[hf.FalconAttention] is hosts["7b"]
    forty = SimpleNamespace(new_decoder_architecture=True, alibi=False)
    rw = SimpleNamespace(new_decoder_architecture=False, alibi=True)
    assert falcon.layout_envoys(forty)[hf.FalconAttention] is hosts["40b"]
    assert falcon.layout_envoys(rw)[hf.FalconAttention] is hosts["rw"]


def _read_at(host_class) -> dict[str, str]:
    return {value.name: value.read_at() for value in host_class.values()}


def test_each_release_reads_where_its_forward_computes():
    """Before 5.25 the values are read at FalconAttention's own ops; from 5.25 at the attention function's call,
    as Llama's; Falcon-RW's head outputs at the output projection's input under both."""
    for layout in ("7b", "40b"):
        old, new = _read_at(falcon.SPLIT_HEADS[layout]), _read_at(falcon.INTERFACE[layout])
        assert "apply_rotary_pos_emb_0" in old["attention_queries"] and "reshape_2" in old["attention_values"]
        assert "attn_output_permute_0" in old["attention_head_outputs"]
        for name in ("attention_queries", "attention_keys", "attention_values", "attention_head_outputs",
                     "attention_scores", "attention_probabilities"):
            assert "attention_interface_1" in new[name], (layout, name, new[name])
    old, new = _read_at(falcon.SPLIT_HEADS["rw"]), _read_at(falcon.INTERFACE["rw"])
    assert [old[n] for n in ("attention_queries", "attention_keys", "attention_values")] == [
        "inside the forward: the output of reshape_0", "inside the forward: the output of reshape_1",
        "inside the forward: the output of reshape_2"]
    assert all("attention_interface_1" in new[n] for n in ("attention_queries", "attention_keys", "attention_values"))
    assert old["attention_head_outputs"] == new["attention_head_outputs"] == "the child module o_proj's input"


def test_the_yaml_claims_each_releases_read_points():
    """The claims the build checks under each release (claims.values, with claims.releases' in place) are the read
    points of the host that release picks."""
    from generator.facts.claims import release_claims
    from generator.recipe.family import load_family

    family = load_family(ROOT / "families" / "falcon.yaml")
    for release in ("5.23.0", "5.24.0", "5.25.0"):
        claims = release_claims(family, release)["model.layers[i].self_attn"]
        for name, read_at in _read_at(falcon.attentions(release)["7b"]).items():
            assert claims[name]["read_at"] == read_at, (release, name)


def test_no_relation_is_dropped_on_5_25():
    """Each layout's 5.25 host states as many relations as before, proving the same values from the same reads; only
    the check against the module's own _split_heads, which 5.25 removed, is left out of the split's relation."""
    for layout in LAYOUTS:
        old, new = falcon.SPLIT_HEADS[layout].RELATIONS, falcon.INTERFACE[layout].RELATIONS
        assert sorted((r.proves, r.reads) for r in old) == sorted((r.proves, r.reads) for r in new), layout
        assert sum("_split_heads" in r.text for r in old) == 1 and not any("_split_heads" in r.text for r in new)
    split = [r.text for r in falcon.INTERFACE["40b"].RELATIONS if r.text.startswith("q, k, v")]
    assert len(split) == 1 and "which the attention repeats" in split[0] and "broadcast" not in split[0]


def test_the_locked_releases_relations_are_the_recorded_ones():
    """The 5.23 relations are word for word those its release record keeps (the factories did not change them)."""
    import json

    record = json.loads((ROOT / "releases" / "transformers-5.23.0.json").read_text(encoding="utf-8"))
    kept = {key.split("::", 1)[1] for key in record["families"]["falcon"]["relations"]}
    texts = {r.text for r in falcon.SPLIT_HEADS["7b"].RELATIONS}
    assert texts <= kept, texts - kept


@pytest.mark.parametrize(("release", "kv"), [("5.24.0", [1, 4, 4]), ("5.25.0", [1, 2, 4])])
def test_the_key_value_heads_per_release(release, kv):
    """Falcon-40B's keys enter the attention broadcast to every query head before 5.25, one per group from 5.25."""
    configs = [SimpleNamespace(multi_query=True, new_decoder_architecture=False, num_kv_heads=4),
               SimpleNamespace(multi_query=True, new_decoder_architecture=True, num_kv_heads=2),
               SimpleNamespace(multi_query=False, new_decoder_architecture=False, num_kv_heads=4)]
    assert [falcon.kv_heads(config, 4, release) for config in configs] == kv


def _module(variant: str | None):
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import load_family

    family = load_family(ROOT / "families" / "falcon.yaml")
    model = nncanon.load(checkpoint_dir(family.variant(variant) if variant else family))
    return model.layers[1].self_attn._module


def _split_as_5_25(module, x):
    """FalconAttention.forward of 5.25 up to the attention call (its modeling_falcon.py, transcribed): q, k, v in
    ``[batch, heads, seq, head_dim]``, the rotary left out (the relations hold the rotated ones by their lengths)."""
    input_shape = x.shape[:-1]
    fused = module.query_key_value(x).view(*input_shape, -1, module.head_dim)
    if module.new_decoder_architecture:
        grouped = fused.view(*input_shape, module.num_kv_heads, -1, module.head_dim)
        q, k, v = grouped[..., :-2, :].flatten(-3, -2), grouped[..., -2, :], grouped[..., -1, :]
    elif module.multi_query:
        q, k, v = fused.split([module.num_heads, 1, 1], dim=-2)
    else:
        q, k, v = fused.unflatten(-2, (module.num_heads, 3)).unbind(-2)
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


@pytest.mark.parametrize("variant", [None, "40b", "rw"])
def test_the_5_25_split_relations_hold_on_5_25s_split(variant):
    """Each 5.25 split relation, run on the q, k and v 5.25's forward hands the attention (one key and value head per
    group on 40B), holds exactly; the locked release's 40B relation, which expects the keys broadcast, does not."""
    from nncanon.core.relations import error

    module = _module(variant)
    layout = {None: "7b", "40b": "40b", "rw": "rw"}[variant]
    relation = next(r for r in falcon.INTERFACE[layout].RELATIONS if r.text.startswith("q, k, v"))
    x = torch.randn(2, 5, module.query_key_value.in_features, generator=torch.Generator().manual_seed(0))
    q, k, v = _split_as_5_25(module, x)
    read = {"input": (x,), "attention_queries": q, "attention_keys": k, "attention_values": v}
    host = SimpleNamespace(_module=module)
    with torch.no_grad():
        assert max(error(a, b) for a, b in relation.compute(host, read)) == 0
        if variant == "40b" and not falcon.on_interface():  # the locked release's relation calls _split_heads
            old = next(r for r in falcon.SPLIT_HEADS["40b"].RELATIONS if r.text.startswith("q, k, v"))
            assert max(error(a, b) for a, b in old.compute(host, read)) == float("inf")


@pytest.mark.parametrize(("entry", "why"), [
    ({">=5.25": {"model.layers[i].self_attn": {"attention_sinks": {"layout": "x", "read_at": "y"}}}},
     "claims.values makes no such claim"),
    ({"five twenty-five": {}}, "is not a version specifier"),
])
def test_a_release_claim_replaces_one_of_claims_values(tmp_path, entry, why):
    """claims.releases only replaces claims claims.values makes (the locked release's), under a valid specifier."""
    import yaml

    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    data = yaml.safe_load((ROOT / "families" / "falcon.yaml").read_text(encoding="utf-8"))
    data["claims"]["releases"] = entry
    path = tmp_path / "falcon.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (tmp_path / "falcon.notes.md").write_text((ROOT / "families" / "falcon.notes.md").read_text(encoding="utf-8"))
    with pytest.raises(FamilyYamlError, match=why):
        load_family(path)


def test_claims_writes_claims_values_under_the_locked_release_only(monkeypatch):
    """``python -m generator claims falcon`` under 5.25 would put 5.25's read points in claims.values, the locked
    release's: it refuses, naming the claims.releases entry; under 5.23 it goes on."""
    import transformers

    from generator.contribute import _refuse_a_moved_release
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    family = load_family(ROOT / "families" / "falcon.yaml")
    monkeypatch.setattr(transformers, "__version__", "5.23.0")
    _refuse_a_moved_release(family)
    monkeypatch.setattr(transformers, "__version__", "5.25.0")
    with pytest.raises(FamilyYamlError, match=r"claims.releases.>=5.25.*the locked release's"):
        _refuse_a_moved_release(family)
