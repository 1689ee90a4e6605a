"""The Mechanics page (generator/site/mechanics.py): generated from the facts alone, a family listed under a mechanic
only when one of its proven relations states it. No torch: the facts are written here, in the facts schema's
``relations`` shape, from the relation texts the shared parts write (nncanon/parts/)."""

from __future__ import annotations

import re
import subprocess
import sys

import markdown
from import_graph import REPO
from limits import HANG

from generator.site.escaping import slug
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


# -- each mechanic's chain, drawn from the facts ---------------------------------------------------------------------


#: a module call a relation reads (``input``, ``q_norm.output``): a term, but no value of the drawing
_CALL = re.compile(r"(?<![\w.\]])(\w+\.)*(input|inputs|output)(?![A-Za-z0-9_])")


def _named(text: str, names: dict[str, str], calls: bool = False) -> set[str]:
    """The value rows whose names (relative to the relation's host) stand alone in ``text``; with ``calls``, a
    module call the text names counts too, as ``"call"``."""
    found = {row for name, row in names.items() if re.search(rf"(?<![\w.\]]){re.escape(name)}(?![A-Za-z0-9_])", text)}
    return found | ({"call"} if calls and _CALL.search(text) else set())


def _expected_chain(facts: dict, kind: dict, host: str) -> tuple[set, set]:
    """The chain of ``host``'s values in ``kind``, from the relations' texts the facts hold: two values are tied
    when they stand on the two sides of one ``==`` of one clause (split at ";") of a relation of the block (a module
    call on one side places the other, and ties no value), else, for a relation whose text places none so, each
    value it names and does not prove is tied to each it proves; a tie runs from the value the measured sequence
    has first. A value no tie reaches is fed by the one before it."""
    sequence = [r for r in kind["sequence"] if r.rpartition(".")[0] == host or r.startswith(host + ".")]
    at = {row: i for i, row in enumerate(sequence)}
    proves = {(r["host"], r["text"]): r["proves"] for r in facts["relations"]}
    ties = set()
    for relation in kind["relations"]:
        names = {row[len(relation["host"]) + 1:]: row for row in sequence if row.startswith(relation["host"] + ".")}
        found = set()
        for clause in relation["text"].split(";"):
            sides = [_named(side, names, calls=True) for side in clause.split("==")]
            found |= {(a, b) for i, side in enumerate(sides) for other in sides[i + 1:] for a in side for b in other}
        if not found:
            proved = {names[p] for p in proves[relation["host"], relation["text"]] if p in names}
            found = {(a, b) for a in _named(relation["text"], names) - proved for b in proved}
        ties |= {(a, b) if at[a] < at[b] else (b, a) for a, b in found if a != b and "call" not in (a, b)}
    fed = {b for _, b in ties}
    return ties, {(a, b) for a, b in zip(sequence, sequence[1:]) if b not in fed}


def _outside_blocks_is_the_proof_chain(facts: dict, host: str, arcs: dict, name: str) -> None:
    """A mechanic of the root or the vision tower: its solid arcs are the ties of the proof chain the build checked
    (the facts' ``proof_chain``) that touch the host's own values, each from the value the forward produced first,
    and each between two of its own values is stated by one relation of the host: its text names both (blocks as
    ``layers[i]``), or it proves one of them (the other a term it reads and its text does not place)."""
    graph = max(facts["proof_chain"].values(), key=lambda g: sum(r.rpartition(".")[0] == host for r in g["order"]))
    own = {row for row in graph["order"] if row.rpartition(".")[0] == host}
    at = {row: i for i, row in enumerate(graph["order"])}
    assert own and arcs["flow"] == {tuple(e) for e in graph["edges"] if own & set(e)}, name
    assert all(at[a] < at[b] for a, b in arcs["flow"] | arcs["order"]), name
    relations = [r for r in facts["relations"] if r["host"] == host]
    for a, b in arcs["flow"]:
        if a in own and b in own:
            names = {a[len(host) + 1:]: a, b[len(host) + 1:]: b}
            # its text names both, or it proves one and reads the other without placing it in its text
            assert any(_named(re.sub(r"layers\[[^\]]*\]", "layers[i]", r["text"]), names) == {a, b}
                       or set(names) & set(r["proves"]) for r in relations), (name, a, b)


def test_each_mechanics_drawing_is_the_chain_its_relations_state(all_facts):
    """Every mechanic is drawn, and every drawn arc, solid or dashed, is the one the relations in the facts give:
    within a block computed here from their texts, outside the blocks the proof chain's ties the facts hold."""
    rows = mechanics_table(list(all_facts.values()))
    assert all(row["chain"] for row in rows), [row["name"] for row in rows if not row["chain"]]
    for row in rows:
        chain = row["chain"]
        facts = all_facts[chain["family"]]
        host = next(f["host"] for f in row["families"] if f["family"] == chain["family"])
        rows_of = {b.id: f"model.{b.path}" for b in chain["drawing"]["boxes"]}
        arcs = {how: {(rows_of[a["from"]], rows_of[a["to"]]) for a in chain["drawing"]["arcs"] if a["how"] == how}
                for how in ("flow", "order")}
        if chain["kind"] is None:
            _outside_blocks_is_the_proof_chain(facts, host, arcs, row["name"])
        else:
            kind = next(k for k in facts["stack"]["block_kinds"] if k["kind"] == chain["kind"])
            assert any(r["text"] == f["text"] for f in row["families"] if f["family"] == chain["family"]
                       for r in kind["relations"])  # the block kind drawn proves the mechanic
            assert (arcs["flow"], arcs["order"]) == _expected_chain(facts, kind, host), row["name"]
        # the text alternative lists every arc, and only those
        listed = {(f"model.{e['source']}".replace("block", "layers[i]", 1), f"model.{e['target']}".replace(
            "block", "layers[i]", 1), e["how"]) for e in chain["edges"]}
        assert listed == {(a, b, how) for how, pairs in arcs.items() for a, b in pairs}, row["name"]


def test_the_chain_is_an_image_with_a_title_a_description_and_its_edges_as_text(all_facts):
    rows = mechanics_table(list(all_facts.values()))
    page = _env().get_template("mechanics.md.j2").render(mechanics=rows)
    for row in rows:
        if not row["chain"]:
            continue
        start = page.index(f'id="nc-mech-{slug(row["name"])}"')
        figure = page[start:page.index("</details>", start)]
        svg = figure[figure.index("<svg"):figure.index("</svg>")]
        assert 'role="img"' in svg and "<title " in svg and "<desc " in svg and "tabindex" not in svg, row["name"]
        assert figure.count("<li>") == len(row["chain"]["edges"]) == svg.count('class="nc-edge '), row["name"]
