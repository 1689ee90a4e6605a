"""The SAE index: SAELens's releases (generator/survey/saelens_releases.json) on the family pages' checkpoints.

The kept file's hook mapping is recomputed here from the table the build checks against TransformerBridge, the
extractor is run on a wheel written here, and the page's rows are checked against every family's facts: a release is
on the row of the family whose page lists its checkpoint, and a value it maps to is one that family serves.
"""

from __future__ import annotations

import json
import re
import zipfile

import pytest

from generator.survey.saelens import KEPT, extract, hook_template, standard_hooks


def test_the_kept_mapping_is_the_transformer_lens_tables():
    standard = standard_hooks()
    data = json.loads(KEPT.read_text(encoding="utf-8"))
    mapped = 0
    for release in data["releases"]:
        for template, entry in (release["hooks"] or {}).items():
            assert entry["value"] == standard.get(template), (release["release"], template)
            mapped += entry["value"] is not None
    assert mapped >= 40 and len(data["releases"]) >= 100


@pytest.mark.parametrize("rest, template", [
    ("hook_resid_pre", "blocks.{i}.hook_resid_pre"),
    ("hook_resid_post__trainer_3_step_97", "blocks.{i}.hook_resid_post"),  # one trainer of a sweep
    ("hook_resid_pre_24576", "blocks.{i}.hook_resid_pre"),  # a width
    ("hook_z", "blocks.{i}.attn.hook_z"),  # TransformerLens's alias inside a block
    ("hook_mystery", "blocks.{i}.hook_mystery"),
])
def test_a_release_suffix_is_not_part_of_the_hook(rest, template):
    assert hook_template(rest, standard_hooks()) == template


def test_the_extractor_reads_a_wheels_release_list(tmp_path):
    yaml_text = """
tl-style:
  model: gpt2-small
  repo_id: someone/gpt2-saes
  conversion_func: null
  saes:
    - {id: blocks.0.hook_resid_pre, path: a}
    - {id: blocks.5.hook_resid_pre, path: b}
    - {id: blocks.5.hook_mlp_out, path: c}
scope-style:
  model: google/gemma-2-2b
  repo_id: google/gemma-scope-2b-pt-res
  conversion_func: gemma_2
  saes:
    - {id: layer_0/width_16k/canonical, path: d}
"""
    wheel = tmp_path / "sae_lens-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("sae_lens/pretrained_saes.yaml", yaml_text)
    data = extract(wheel)
    assert "sae-lens 9.9.9" in data["source"]
    scope, tl = data["releases"]
    assert tl["checkpoint"] == "openai-community/gpt2" and tl["saes"] == 3
    assert tl["hooks"] == {"blocks.{i}.hook_resid_pre": {"layers": [0, 5], "saes": 2,
                                                          "value": "model.layers[i].layer_input"},
                           "blocks.{i}.hook_mlp_out": {"layers": [5], "saes": 1, "value": "model.layers[i].mlp.mlp_output"}}
    assert scope["checkpoint"] == "google/gemma-2-2b" and scope["hooks"] is None
    assert scope["example"] == "layer_0/width_16k/canonical"


def _rows(page: str) -> list[tuple[str, str]]:
    """(release, the family it is listed under) for each release row of the index's first table."""
    table = page.split('class="nc-families nc-sae-index"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<td rowspan="\d+"><code>([^<]+)</code>.*?<a href="\.\./families/([^/]+)/">', table, re.S)


def test_the_index_lists_each_release_under_the_family_whose_page_has_its_checkpoint(site, all_facts):
    out, _ = site
    page = (out / "sae-index" / "index.html").read_text(encoding="utf-8")
    data = json.loads(KEPT.read_text(encoding="utf-8"))
    owner = {s["checkpoint"]: name for name, f in all_facts.items() for s in f["sizes"]}
    expected = sorted((r["release"], owner[r["checkpoint"]]) for r in data["releases"] if r["checkpoint"] in owner)
    assert sorted(_rows(page)) == expected and len(expected) >= 20
    served = {name: {f"{h['path']}.{v['name']}" for h in f["hosts"] for v in h["values"] if any(v["availability"].values())}
              for name, f in all_facts.items()}
    table = page.split('class="nc-families nc-sae-index"', 1)[1].split("</table>", 1)[0]
    blocks = {re.search(r"<code>([^<]+)</code>", b).group(1): b
              for b in re.split(r"(?=<tr[^>]*>\s*<td rowspan=)", table) if "rowspan" in b}
    for release in data["releases"]:
        family = owner.get(release["checkpoint"])
        for entry in (release["hooks"] or {}).values() if family else ():
            value, block = entry["value"], blocks[release["release"]]
            if value in served[family]:
                assert f"<code>{value}</code>" in block, (release["release"], value)
            elif value:
                assert f"{family} does not serve {value}" in block, (release["release"], value)
    # a release the family page's SAE section states maps to the hook it states there
    stated = {r["id"].split(" (")[0]: r["hook"] for f in all_facts.values() for r in (f.get("saes") or {}).get("releases", [])}
    assert "gemma-scope-2-1b-it-res" in stated and "gemma-scope-2-1b-it-res" in page
    family_page = (out / "families" / "gemma3_text" / "index.html").read_text(encoding="utf-8")
    assert 'id="saelens-releases"' in family_page and "gemma-scope-2-1b-it-res" in family_page
