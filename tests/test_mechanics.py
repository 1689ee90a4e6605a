"""The Mechanics page (generator/site/mechanics.py): generated from the facts alone, a family listed under a mechanic
only when one of its proven relations states it. No torch: the facts are written here, in the facts schema's
``relations`` shape, from the relation texts the shared parts write (nncanon/parts/)."""

from __future__ import annotations

import subprocess
import sys

import markdown
from import_graph import REPO
from limits import HANG

from generator.site.mechanics import MECHANICS, mechanics_table
from generator.site.render import _env


def _facts(family: str, *texts: str) -> dict:
    return {"family": family, "relations": [{"host": "model.layers[i]", "text": t, "errors": {"eager": "0", "sdpa": "0"}}
                                            for t in texts]}


PARALLEL = ("layer_input + self_attn.attention_output + mlp.mlp_output == layer_output: one sum, both sublayers "
            "reading layer_input")
ONE_NORM = "mlp_input == attention_norm_output: the MLP reads the attention's normed input (one norm), not any sum"
FUSED = "q | k | v == query_key_value(input) viewed [batch, seq, heads, 3·head_size]"


def test_a_family_is_listed_under_the_mechanics_its_relations_state():
    rows = {r["name"]: r for r in mechanics_table([_facts("gptj", PARALLEL, ONE_NORM), _facts("gpt_neox", PARALLEL, FUSED),
                                                    _facts("llama", "layer_mid + mlp.mlp_output == layer_output")])}
    assert [f["family"] for f in rows["Parallel attention and MLP"]["families"]] == ["gpt_neox", "gptj"]
    assert [f["family"] for f in rows["One LayerNorm per block"]["families"]] == ["gptj"]
    assert rows["Fused query_key_value"]["families"][0]["text"] == FUSED
    assert rows["Parallel attention and MLP"]["families"][0]["loads"] == ["eager", "sdpa"]
    assert "ALiBi" not in rows  # no family proves it: off the page, not an empty row


def test_every_mechanic_is_recognised_by_the_text_its_shared_part_writes():
    """Each marker matches a relation text nncanon's parts or families write, so no mechanic is unreachable."""
    code = ("import re, sys; from nncanon.families import FAMILIES, family_module; "
            "from generator.site.mechanics import MECHANICS; "
            "texts = [r.text for name in FAMILIES for host in family_module(name).ENVOYS.values() "
            "for r in getattr(host, 'RELATIONS', ())] + [r.text for name in FAMILIES for r in family_module(name).ROOT.RELATIONS]; "
            "missing = [m.name for m in MECHANICS if not any(re.search(m.marker, t) for t in texts)]; "
            "print(missing); sys.exit(1 if missing else 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG)  # a hung import
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]


def test_the_page_renders_a_table_per_mechanic_with_the_relation_escaped():
    page = _env().get_template("mechanics.md.j2").render(mechanics=mechanics_table([_facts("gpt_neox", PARALLEL, FUSED)]))
    html = markdown.markdown(page, extensions=["tables"])
    assert html.count("<table>") == 2  # the parallel block and the fused projection
    assert "q | k | v" not in page and "q \\| k \\| v" in page  # a pipe in a relation does not split the table
    assert '<a href="families/gpt_neox.md">gpt_neox</a>' in html  # plain link text: code on a link fails dark contrast


def test_the_renderer_imports_no_torch():
    code = "import sys, generator.site.mechanics, generator.site.render; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=HANG).returncode == 0  # stops a hung import only


def test_mechanics_have_distinct_names():
    assert len({m.name for m in MECHANICS}) == len(MECHANICS)


def test_the_page_groups_mechanics_as_the_library_groups_its_parts():
    """Each mechanic's kind is one of the page's kinds, and each kind names a folder of nncanon/parts/: a new
    mechanism goes in the folder of the kind its row is listed under."""
    from generator.site.mechanics import KINDS

    parts = REPO / "nncanon" / "parts"
    assert all((parts / folder / "__init__.py").is_file() for folder in KINDS.values()), KINDS
    assert {m.kind for m in MECHANICS} <= set(KINDS)
    page = _env().get_template("mechanics.md.j2").render(mechanics=mechanics_table(
        [_facts("gpt_neox", PARALLEL, FUSED)]))
    assert page.index("## Text blocks") < page.index("### Parallel attention and MLP") < page.index(
        "## Attention variants") < page.index("### Fused query\\_key\\_value")
