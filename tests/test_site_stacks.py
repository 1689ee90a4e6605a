"""issue 49: an encoder-decoder's page draws its two stacks side by side with the cross-attention's arrow from the
encoder's output, groups its support tables by stack and sizes each stack in its cheat sheet.

Checked against what the page is drawn from only where that is the claim (the relations the facts checked); the
sizes against the full-size checkpoint's config.json (the facts' raw config rows, as the checkpoint publishes them),
the arrows against the boxes they join. Every family the facts have is read (the native facts, collected once).
"""

from __future__ import annotations

import json
import re

import pytest

from generator.site.escaping import slug
from generator.site.render import render_family_files

#: each stack's config.json fields under either naming (BART's and Whisper's, T5's): (blocks, heads); width is d_model
FIELDS = {"model.encoder": (("encoder_layers", "num_layers"), ("encoder_attention_heads", "num_heads")),
          "model.decoder": (("decoder_layers", "num_decoder_layers"), ("decoder_attention_heads", "num_heads"))}
_BOX = re.compile(r'<g class="nc-part[^"]*" id="[^"]+" data-path="([^"]+)"[^>]*transform="translate\(([\d.]+),([\d.]+)\)"'
                  r'[^>]*>\s*<rect class="nc-box" width="([\d.]+)" height="([\d.]+)"')
_CROSS = re.compile(r'<polyline class="nc-link nc-cross" data-from="([^"]+)" data-to="([^"]+)" points="([^"]+)"')


def _two_stacks(all_facts: dict) -> dict[str, dict]:
    return {name: f for name, f in all_facts.items()
            if {"model.encoder.layers[i]", "model.decoder.layers[i]"} <= {h["path"] for h in f["hosts"]}}


def _raw(facts: dict) -> dict:
    table = next(t for t in facts["configs"] if facts["printout"]["checkpoint"] in [t["checkpoint"], *t["also"]])
    return dict(table["raw"])


def _field(raw: dict, names: tuple[str, ...]):
    return next(raw[n] for n in names if n in raw)


@pytest.fixture(scope="module")
def pages(all_facts):
    """Each encoder-decoder's page and the diagram data it fetches, rendered from its native facts."""
    out = {}
    for name, facts in _two_stacks(all_facts).items():
        page, data = render_family_files(facts)
        out[name] = (page, json.loads(data))
    return out


def test_the_encoder_decoders_are_the_seven_verified_ones(pages):
    assert {"t5", "mt5", "bart", "mbart", "marian", "pegasus", "whisper"} <= set(pages)


def test_both_stacks_are_drawn_sized_by_the_checkpoints_config(all_facts, pages):
    for name, (page, data) in pages.items():
        raw = _raw(all_facts[name])
        assert 'id="nc-stacks"' in page and 'id="nc-stack-chain"' not in page, name
        assert [s["path"] for s in data["stacks"]] == ["model.encoder", "model.decoder"], name
        for stack in data["stacks"]:
            blocks = _field(raw, FIELDS[stack["path"]][0])
            assert stack["blocks"] == blocks, (name, stack)
            layers = [p for p in data["parts"].values() if p["path"] == stack["path"][len("model."):] + ".layers"]
            assert layers and all(p["count"] == blocks for p in layers), (name, stack["path"])
            # the stack's own values (its embeddings, its final norm) are parts of the drawing
            assert any(p["value"].startswith(stack["path"] + ".") and "[i]" not in p["value"]
                       for p in data["parts"].values()), (name, stack["path"])
        # every value the drawing names is one some load serves (BART's stacks have no final norm: not drawn)
        served = {f"{h['path']}.{v['name']}" for h in all_facts[name]["hosts"] for v in h["values"]
                  if any((v.get("availability") or {"any": True}).values())}
        named = {r for p in data["parts"].values() if p["kind"] is None for r in [p["value"]] if r}
        assert named and named <= served, (name, named - served)
        # the slider's block i is block i of the encoder's list, then the decoder's from 0
        encoder = _field(raw, FIELDS["model.encoder"][0])
        assert data["local"] == list(range(encoder)) + list(range(len(data["blocks"]) - encoder)), name


def test_the_cross_attention_arrow_leaves_what_its_checked_relation_says_it_reads(all_facts, pages):
    """The arrow's source is the part that draws the right side of the relation ``encoder_states == ...`` the facts
    checked on the cross-attention: the encoder's final norm where a relation on the encoder proves its output is
    the norm's (T5, Whisper, mBART, Pegasus), its blocks where the relation names the last block's output (BART)."""
    for name, (page, data) in pages.items():
        facts = all_facts[name]
        (source,) = {m.group(1) for r in facts["relations"] if r["host"] == "model.decoder.layers[i].cross_attn"
                     for m in [re.match(r"encoder_states == (\S+?):", r["text"])] if m}
        assert data["cross"], name
        for arrow in data["cross"]:
            assert arrow["to_value"] == "model.decoder.layers[i].cross_attn.encoder_states", name
            if source == "model.encoder.stack_output":
                assert any(r["host"] == "model.encoder" and {"stack_output", "final_norm_output"} <= set(r["proves"])
                           for r in facts["relations"]), name
                assert arrow["from_value"] == "model.encoder.final_norm_output", name
            else:
                assert source.startswith("model.encoder.layers[-1]") and arrow["from"] == "encoder.layers", name
        if name in ("t5", "whisper"):
            assert data["cross"][0]["from_value"] == "model.encoder.final_norm_output"
        # in both drawings (wide, narrow) the arrow runs from the source box's edge to the target box's edge
        drawings = page.split('<div class="nc-scroll nc-narrow">', 1)
        for drawing in (drawings[0].split('id="nc-stacks"', 1)[1], drawings[1].split("</svg>", 1)[0]):
            boxes = {m.group(1): tuple(float(g) for g in m.groups()[1:]) for m in _BOX.finditer(drawing)}
            arrows = _CROSS.findall(drawing)
            assert len(arrows) == len(data["cross"]), name
            for src, dst, points in arrows:
                pts = [tuple(map(float, p.split(","))) for p in points.split()]
                (sx, sy, sw, sh), (dx, dy, dw, dh) = boxes[src], boxes[dst]
                assert pts[0][0] == pytest.approx(sx + sw) and sy <= pts[0][1] <= sy + sh, (name, src)
                assert pts[-1][0] in (pytest.approx(dx), pytest.approx(dx + dw)) and dy <= pts[-1][1] <= dy + dh, name


def _sections(text: str, marks: list[str]) -> list[str]:
    """``text`` cut at each of ``marks`` in turn (each found after the one before)."""
    out, rest = [], text
    for mark in marks:
        head, found, rest = rest.partition(mark)
        assert found, mark
        out.append(head)
    return out + [rest]


def _group(host: dict) -> int:
    """Where a host belongs, read from its path and its values: the whole model, the encoder, the decoder, or the
    cross-attention (the decoder's host that reads the encoder's states)."""
    if any(v["name"] == "encoder_states" for v in host["values"]):
        return 3
    return next((n for n, p in ((1, "model.encoder"), (2, "model.decoder")) if host["path"].startswith(p)), 0)


def test_the_support_tables_and_the_cheat_sheet_are_grouped_by_stack(all_facts, pages):
    for name, (page, _) in pages.items():
        facts = all_facts[name]
        raw = _raw(facts)
        support = page.split("{ #support }", 1)[1]
        groups = _sections(support, ["{ #support-encoder }", "{ #support-decoder }", "{ #support-cross-attention }"])
        sheet = page.split('class="nc-cheat"', 1)[1].split("</details>", 1)[0]
        heads = _sections(sheet, ["<strong>the encoder · model.encoder</strong>", "<strong>the decoder · model.decoder",
                                  "<strong>the cross-attention"])
        for host in facts["hosts"]:
            n = _group(host)
            anchor = host["path"] if [h["path"] for h in facts["hosts"]].count(host["path"]) == 1 else None
            if anchor:
                table = f'data-path="{host["path"]}"'
                assert [table in g for g in groups].index(True) == n, (name, host["path"])
                link = f'href="#v-{slug(host["path"])}-'
                assert [link in h for h in heads].index(True) == n, (name, host["path"])
        # each stack's line: its blocks, width and heads as the checkpoint's config.json gives them
        for n, stack in ((1, "model.encoder"), (2, "model.decoder")):
            line = heads[n].split("</p>", 1)[0]
            sizes = re.findall(r'<span class="nc-cheat-size">([^<]+)</span>', line)
            want = [f"{_field(raw, FIELDS[stack][0])} blocks", f"width {raw['d_model']:,}",
                    f"heads {_field(raw, FIELDS[stack][1])}"]
            assert sizes[:3] == want, (name, stack, sizes)


def test_a_page_of_one_stack_is_drawn_as_before(all_facts):
    """A decoder-only and an encoder-only page: the one chain, no stacks, nothing more in the diagram data."""
    for name in ("llama", "bert"):
        page, data = render_family_files(all_facts[name])
        assert 'id="nc-stack-chain"' in page and "nc-stacks" not in page and "nc-cheat-stack" not in page, name
        assert not {"local", "stacks", "cross"} & set(json.loads(data)), name
