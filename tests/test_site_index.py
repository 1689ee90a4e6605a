"""The site across families: the families index's facets, the navigation by line, and search to a value.

Built once from every family's facts (collected once per run, tests/conftest.py: ``site``) with ``site_url`` set,
as tests/test_browser.py does for one family. The facet vocabulary is checked against the measured
traits it is made from; the filter, the navigation and search are checked in Chromium.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browser_site import until

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- one vocabulary, from the traits


def test_the_same_mechanism_gets_the_same_word(all_facts):
    from generator.site.families_index import PLACEMENTS, facets

    terms = {name: facets(f) for name, f in all_facts.items()}
    # qwen3's block kind is labelled "Attention with q/k norms", qwen3_vl's "Attention": both measured q/k norms
    assert "q/k norms" in terms["qwen3"]["attention"] and "q/k norms" in terms["qwen3_vl"]["attention"]
    # the four DeltaNet families carry one mixer word, whatever their labels ("+ MLP", "+ mixture")
    deltanet = {name for name, t in terms.items() if "gated DeltaNet" in t["mixer"]}
    assert deltanet == {"qwen3_5_text", "qwen3_next", "qwen3_5_moe_text", "olmo_hybrid"}
    for name, f in all_facts.items():
        t, traits = terms[name], f["traits"]
        assert t["mixer"] and t["mlp"] and t["norms"] and t["vision"], name
        assert ("mixture of experts" in t["mlp"] or "mixture + shared expert" in t["mlp"]) == ("mixture" in traits["mlp"])
        assert ("sandwich norms" in t["norms"]) == ("sandwich norms" in traits["block"]), name
        assert ("pre-norm" in t["norms"]) == (not any(m in traits["block"] for m in PLACEMENTS)), name
        assert all(term[0].islower() or term.split()[0] in ("RMSNorm", "LayerNorm") for terms_ in t.values()
                   for term in terms_), (name, t)
        # a windowed attention has one word, in the Mixer facet, whether its config windows some blocks or all
        windowed = "sliding window" in traits.get("attention", []) or any(
            k["kind"] == "sliding_attention" for k in f["stack"].get("block_kinds", []))
        assert ("sliding-window attention" in t["mixer"]) == windowed and "sliding window" not in t["attention"], name


# ---------------------------------------------------------------- navigation


def test_every_family_page_has_the_families_by_line_in_its_navigation(site, all_facts):
    """Every line is in the navigation: the page's own line with each of its families, every other line as a link
    to one of its own (navigation.prune: the whole tree on every page was a tenth of the flagship's bytes)."""
    out, _ = site
    page = (out / "families" / "llama" / "index.html").read_text(encoding="utf-8")
    nav = page.split('class="md-nav md-nav--primary"', 1)[1].split("md-sidebar--secondary", 1)[0]
    linked = set(re.findall(r'href="\.\./(\w+)/"', nav)) | {"llama"}
    for name, f in all_facts.items():
        assert f["group"] in nav, f["group"]
        assert name in linked or f["group"] != all_facts["llama"]["group"], name
    for group in {f["group"] for f in all_facts.values()}:
        assert any(all_facts[n]["group"] == group for n in linked & set(all_facts)), group
    assert 'class="md-footer__link md-footer__link--next"' in page  # previous / next
    assert 'class="md-footer__link md-footer__link--prev"' in page


def test_the_search_index_and_the_flagship_page_stay_inside_their_weight(site, all_facts):
    """issue 52: the search index <= 250 KiB gzipped at every family count this turn ends with, the flagship's HTML <=
    60 KiB; the notes' prose is indexed, the notes' code and the pages' boilerplate are not (they were most of it)."""
    import gzip

    out, _ = site
    index = (out / "search" / "search_index.json").read_bytes()
    flagship = (out / "families" / "qwen3_5_moe_text" / "index.html").read_bytes()
    assert len(gzip.compress(index, 6)) <= 250 * 1024, (len(gzip.compress(index, 6)), len(all_facts))
    assert len(gzip.compress(flagship, 6)) <= 60 * 1024
    docs = json.loads(index)["docs"]
    llama = {d["location"].split("#")[-1]: d["text"] for d in docs if d["location"].startswith("families/llama/")}
    assert all(llama.get(n["slug"]) for n in all_facts["llama"]["notes"])  # every note's prose is found
    assert not any("Hover or focus any part" in d["text"] or "<pre>" in d["text"]
                   for d in docs if d["location"].startswith("families/"))


def test_a_vision_hosts_cheat_sheet_is_sized_by_the_encoder(site, all_facts):
    """Under model.vision the layouts reuse the text's dimension names (Queries [batch num_heads seq qk_head_dim]):
    the cheat sheet sizes them by the printout checkpoint's vision_config, as its YAML gives it, not by the text's."""
    import html

    built, _ = site
    checked = []
    for data in all_facts.values():
        if not data.get("vision"):
            continue
        from generator.recipe.family import get_family

        config = get_family(data["family"]).checkpoint_config(data["printout"]["checkpoint"])  # same_as resolved
        vision = config.get("vision_config", {})
        heads = vision.get("num_attention_heads") or vision.get("num_heads")
        width = vision.get("embed_dim") or vision.get("hidden_size")  # Qwen2-VL: hidden_size is the merger's output
        if not heads or not width:
            continue  # a field its config.json leaves to the class's default: nothing typed to check against
        if not any(h["path"] == "model.vision.layers[i].self_attn" for h in data["hosts"]):
            continue  # a tower whose blocks are proven whole, not served one by one (GOT-OCR 2.0's windowed grid)
        page = html.unescape((built / "families" / data["family"] / "index.html").read_text())
        shown = re.search(r'#v-model-vision-layers-i-self_attn-attention_queries"><code>attention_queries</code></a> '
                          r'<span class="nc-cheat-dims">Queries \[([^\]]*)\]', page)
        assert shown, f"{data['family']}: no cheat-sheet row for the vision attention's queries"
        assert shown[1].split()[1] == str(heads) and shown[1].split()[3] == str(width // heads), (data["family"], shown[1])
        checked.append(data["family"])
    assert {"llava", "gemma3"} <= set(checked), checked


def test_the_stack_chain_draws_only_what_the_root_serves(site, all_facts):
    """A post-norm stack has no final norm (BERT's, BART's, GPT-1's blocks each end in their own LayerNorm): the chain
    of the stack drew a `norm` box there for a value no load serves. Every value a chain box names is served."""
    out, _ = site
    for name, f in all_facts.items():
        page = (out / "families" / name / "index.html").read_text(encoding="utf-8")
        if "nc-stack-chain" not in page:  # an encoder-decoder's two stacks: tests/test_site_stacks.py
            assert 'id="nc-stacks"' in page, name
            continue
        chain = page.split("nc-stack-chain", 1)[1].split("</svg>", 1)[0]
        served = {v["name"] for h in f["hosts"] if h["path"] == "model" for v in h["values"]
                  if any((v.get("availability") or {"any": True}).values())}
        named = [v for v in re.findall(r'<text class="nc-value"[^>]*>([^<]*)</text>', chain)
                 if not v.startswith("×") and v != "the output"]
        assert named and set(named) <= served, (name, named)
    assert "final_norm_output" not in (out / "families" / "bert" / "index.html").read_text(encoding="utf-8").split(
        "nc-stack-chain", 1)[1].split("</svg>", 1)[0]


# ---------------------------------------------------------------- in the browser


# `browser` is tests/conftest.py's, one per run: a second sync_playwright while it runs fails.


def _shown(page) -> set[str]:
    return set(page.eval_on_selector_all("table.nc-families tbody tr:not([hidden]) td:first-child",
                                         "cells => cells.map(c => c.textContent.trim())"))


@pytest.mark.browser
def test_facets_or_within_and_across_and_the_state_is_in_the_url(site, browser, all_facts):
    from generator.site.families_index import facets

    _, base = site
    terms = {name: facets(f) for name, f in all_facts.items()}
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/families/")
    page.click('.nc-trait[data-facet="mlp"][data-term="mixture of experts"]')
    either = {n for n, t in terms.items() if {"mixture of experts", "mixture + shared expert"} & set(t["mlp"])}
    # "mixture of experts" is the broader term: the shared-expert mixtures match it too
    assert _shown(page) == either and len(either) > 4
    page.click('.nc-trait[data-facet="mlp"][data-term="mixture + shared expert"]')
    assert _shown(page) == either
    page.click('.nc-trait[data-facet="attention"][data-term="q/k norms"]')
    both = {n for n in either if "q/k norms" in terms[n]["attention"]}
    assert _shown(page) == both and 0 < len(both) < len(either)
    assert page.inner_text(".nc-trait-count") == f"{len(both)} of {len(terms)} families"
    # each term counts the families shown if it were chosen, the other groups' choices kept
    for term in ("gated MLP", "mixture of experts"):
        with_it = {n for n, t in terms.items() if "q/k norms" in t["attention"] and (
            term in t["mlp"] or (term == "mixture of experts" and "mixture + shared expert" in t["mlp"]))}
        counted = page.inner_text(f'.nc-trait[data-facet="mlp"][data-term="{term}"] .nc-count')
        assert counted == str(len(with_it)), (term, counted, sorted(with_it))
    url = page.url
    assert "mlp=mixture+of+experts" in url and "attention=q%2Fk+norms" in url
    page.goto(url)  # the state survives a reload, or a shared link
    assert _shown(page) == both
    assert page.eval_on_selector('.nc-trait[data-term="q/k norms"]', "b => b.getAttribute('aria-pressed')") == "true"
    page.click(".nc-facet-clear")
    assert len(_shown(page)) == len(terms) and "?" not in page.url
    page.close()


@pytest.mark.browser
@pytest.mark.parametrize("query", ["layers[i].mlp.router_logits", "model.layers[i].mlp.router_logits"])
def test_searching_a_full_path_finds_the_row(site, browser, query):
    _, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/families/qwen3_moe/")
    page.fill("input.md-search__input", query)
    page.wait_for_selector(".md-search-result__item a")
    links = page.eval_on_selector_all(".md-search-result__item a", "els => els.map(e => e.getAttribute('href'))")
    rows = [link for link in links if "#v-" in link]
    # a host several classes serve (deepseek_v3's dense and mixture MLPs) names the class in the anchor
    assert rows and re.search(r"#v-model-layers-i-mlp-(\w+-)?router_logits$", rows[0]), links[:6]
    page.close()


@pytest.mark.browser
@pytest.mark.parametrize("family, value", [("qwen3_moe", "router_logits"), ("gemma2", "attention_probabilities")])
def test_a_search_that_names_the_family_ranks_it_first(site, browser, family, value):
    _, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/families/")
    page.fill("input.md-search__input", f"{family} {value}")
    page.wait_for_selector(".md-search-result__item a")
    links = page.eval_on_selector_all(".md-search-result__item a", "els => els.map(e => e.getAttribute('href'))")
    assert f"families/{family}/" in links[0], links[:6]
    page.close()


@pytest.mark.browser
@pytest.mark.parametrize("checkpoint, family", [("Qwen3-30B-A3B", "qwen3_moe"), ("gemma-2-9b", "gemma2")])
def test_a_search_for_a_checkpoints_name_finds_its_family_first(site, browser, all_facts, checkpoint, family):
    """The checkpoint is one a family's full-size configs name (read from the facts, so the test follows them)."""
    named = [c["checkpoint"] for t in all_facts[family]["configs"] for c in [t, *({"checkpoint": a} for a in
                                                                                 t.get("also", []))]]
    assert any(checkpoint in c for c in named), named
    _, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/families/")
    page.fill("input.md-search__input", checkpoint)
    page.wait_for_selector(".md-search-result__item a")
    links = page.eval_on_selector_all(".md-search-result__item a", "els => els.map(e => e.getAttribute('href'))")
    # the first result is the family's page, and the first of its sections the result lists is the checkpoint's column
    assert f"families/{family}/" in links[0] and "#config-" in links[1], links[:6]
    page.close()


def test_the_search_index_has_a_row_per_value_and_no_diagram_or_printout(site, all_facts):
    out, _ = site
    docs = json.loads((out / "search" / "search_index.json").read_text(encoding="utf-8"))["docs"]
    rows = {d["location"] for d in docs if "#v-" in d["location"]}
    assert len(rows) == sum(len(h["values"]) for f in all_facts.values() for h in f["hosts"])
    text = " ".join(d["text"] for d in docs if "#v-" not in d["location"])
    printout_line = next(line for line in all_facts["llama"]["printout"]["text"].splitlines() if "LlamaDecoderLayer" in line)
    assert printout_line.strip() not in text
    assert "what holds on this block" not in text


@pytest.mark.browser
def test_a_page_view_does_not_load_the_search_index_until_search_is_opened(site, browser):
    _, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requested = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(f"{base}/families/llama/")
    page.wait_for_load_state("networkidle")
    assert not [u for u in requested if "search_index" in u]
    with page.expect_response(lambda r: "search/search_index.json" in r.url and r.ok):
        page.focus("input.md-search__input")
    page.close()


def test_the_cheat_sheet_names_every_value_with_its_full_size_dims_and_links_its_row(site, all_facts):
    """Every value of every host is in the cheat sheet, linked to its support row, its dims sized by the full-size
    checkpoint; the sizes agree with the config table's accessors read for that checkpoint (another path)."""
    out, _ = site
    for name, facts in all_facts.items():
        page = (out / "families" / name / "index.html").read_text(encoding="utf-8")
        sheet = page.split('class="nc-cheat"', 1)[1].split("</details>", 1)[0]
        rows = set(re.findall(r'<tr id="(v-[^"]+)"', page))
        links = re.findall(r'<a href="#(v-[^"]+)"><code>([^<]+)</code></a> <span class="nc-cheat-dims">([^<]*)</span>',
                           sheet)
        assert len(links) == sum(len(h["values"]) for h in facts["hosts"]), name
        assert {anchor for anchor, _, _ in links} <= rows, name
        sizes = facts["printout"]["dims"]
        table = next(t for t in facts["configs"] if facts["printout"]["checkpoint"] in [t["checkpoint"], *t["also"]])
        # the dims every family sizes as the config table's accessors do (a family may size head_dim its own way:
        # deepseek_v3's latent attention)
        for accessor, size in table["accessors"]:
            dim = accessor.removeprefix("model.")
            if dim in ("hidden_size", "vocab_size", "num_heads") and dim in sizes:
                assert sizes[dim] == size, (name, dim)
        for host in facts["hosts"]:
            # under model.vision the layouts' head and MLP dims are the encoder's (test_build checks them against the
            # YAML's vision_config); a host kind's own sizes (a mixture's expert width) are its (checked against the
            # YAML's config below)
            own = {**sizes, **facts["printout"].get("vision_dims", {})} if host["path"].startswith("model.vision") \
                else dict(sizes)
            own.update(next((k["dims"] for k in facts["printout"].get("host_dims", [])
                             if (k["host"], k["class"]) == (host["path"], host["host_class"])), {}))
            for value in host["values"]:
                shown = " ".join(str(own.get(d, d)) for d in value["dims"])
                assert f"{value['layout']} [{shown}]" in sheet, (name, host["path"], value["name"])


#: the dimensions a shape cell names because their size is the prompt's or the image's, not the checkpoint's
#: (Mllama's image_batch, image_tiles and vision_tokens count the images a prompt carries: nncanon/families/mllama.py;
#: a speech encoder's frames and source positions count the audio a call carries: nncanon/parts/encoders/speech.py)
PROMPT_DIMS = {"batch", "seq", "query", "key", "images", "patches", "features", "image_tokens", "image_batch",
               "image_tiles", "vision_tokens", "frames", "source"}


def test_no_shape_cell_prints_a_config_fields_name(site, all_facts):
    """Every dimension a cheat-sheet entry or a Weights row names is sized by the full-size checkpoint, but those the
    prompt sizes: a mixture's expert width printed `intermediate_size` where the checkpoint has a number."""
    out, _ = site
    for name in all_facts:
        page = (out / "families" / name / "index.html").read_text(encoding="utf-8")
        sheet = page.split('class="nc-cheat"', 1)[1].split("</details>", 1)[0]
        cells = [m.split("[", 1)[1] for m in re.findall(r'<span class="nc-cheat-dims">([^<]*)</span>', sheet)]
        weights = page.split('id="weights"', 1)[1] if 'id="weights"' in page else ""
        cells += re.findall(r"<td><code>\[([^<\]]*)\]</code></td>", weights)
        assert cells, name
        named = {word for cell in cells for word in re.findall(r"[A-Za-z_]\w*", cell)} - PROMPT_DIMS
        assert not named, (name, sorted(named))


#: the field of the printout checkpoint's config.json each mixture's host kinds are as wide as (read from the YAML,
#: not from the model the facts measured)
EXPERT_WIDTH = {
    "qwen3_moe": {"model.layers[i].mlp": "moe_intermediate_size"},
    "qwen3_next": {"model.layers[i].mlp": "moe_intermediate_size",
                   "model.layers[i].mlp.shared_experts": "shared_expert_intermediate_size"},
    "qwen2_moe": {"model.layers[i].mlp": "moe_intermediate_size",
                  "model.layers[i].mlp.shared_experts": "shared_expert_intermediate_size"},
    "deepseek_v3": {"model.layers[i].mlp": "moe_intermediate_size"},
    "olmoe": {"model.layers[i].mlp": "intermediate_size"},
    "gpt_oss": {"model.layers[i].mlp": "intermediate_size"},
}


@pytest.mark.parametrize("family", sorted(EXPERT_WIDTH))
def test_a_mixtures_expert_width_is_its_checkpoints(all_facts, family):
    from generator.recipe.family import get_family

    fam = get_family(family)
    config = fam.checkpoint_config(fam.printout_checkpoint)
    config = config.get("text_config") or config
    own = {k["host"]: k["dims"] for k in all_facts[family]["printout"]["host_dims"]}
    for host, field in EXPERT_WIDTH[family].items():
        assert own[host]["intermediate_size"] == config[field], (family, host, field)


# ---------------------------------------------------------------- the numeric columns


#: checkpoints whose name rounds its active count further than the bound allows, with the count their model card
#: states: LFM2-8B-A1B's card says "8.3B total parameters, 1.5B active" (the name rounds 1.5 down to 1)
BY_ITS_CARD = {"LiquidAI/LFM2-8B-A1B": 1.5e9}


def test_active_parameters_agree_with_the_names_that_state_them(all_facts):
    """A mixture checkpoint's name often states its parameters per token ("Qwen3-30B-A3B": 3B active): the count
    on the meta model (every parameter but the routed experts a token is not sent to) is that number, to the name's
    rounding and the embeddings it may leave out; a dense checkpoint uses all of its parameters."""
    named = 0
    for name, facts in all_facts.items():
        for s in facts["sizes"]:
            if not s["experts"]:
                assert s["active"] == s["parameters"], (name, s["checkpoint"])
                continue
            assert s["active"] < s["parameters"], (name, s["checkpoint"])
            stated = re.search(r"-A(\d+(?:\.\d+)?)B\b", s["checkpoint"])
            if stated:
                named += 1
                ratio = s["active"] / (BY_ITS_CARD.get(s["checkpoint"]) or float(stated.group(1)) * 1e9)
                assert 0.75 <= ratio <= 1.35, (s["checkpoint"], s["active"], ratio)
    assert named >= 4, named


def test_the_properties_page_has_a_row_per_checkpoint_with_its_numbers(site, all_facts):
    out, _ = site
    page = (out / "properties" / "index.html").read_text(encoding="utf-8")
    rows = re.findall(r"<tr data-mixer=.*?</tr>", page, re.S)
    sizes = [(name, s) for name, f in all_facts.items() for s in f["sizes"]]
    assert len(rows) == len(sizes)
    for (name, s), row in zip(sizes, rows):
        assert f"<code>{s['checkpoint']}</code>" in row and f'href="../families/{name}/"' in row, (name, row[:200])
        values = re.findall(r'<td class="nc-num" data-value="([^"]*)"', row)
        assert values[0] == str(s["parameters"]) and values[1] == str(s["active"]), (name, values)


@pytest.mark.browser
@pytest.mark.parametrize("width", [1440, 375])
def test_the_properties_page_sorts_by_active_parameters_and_filters_mixtures(site, browser, all_facts, width):
    _, base = site
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(f"{base}/properties/?mlp=mixture%20of%20experts")
    until(page, "document.querySelector('.nc-trait-count').textContent !== ''", what="the filter from the URL")
    page.click('.nc-sort[data-key="active"]')
    shown = page.eval_on_selector_all("table.nc-properties tbody tr:not([hidden]) td:first-child code",
                                      "cs => cs.map(c => c.textContent)")
    active = {s["checkpoint"]: s["active"] for f in all_facts.values() for s in f["sizes"]
              if "mixture" in f["traits"]["mlp"]}
    assert sorted(shown) == sorted(active) and [active[c] for c in shown] == sorted(active.values(), reverse=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.close()



@pytest.mark.parametrize("family", ["gpt2", "qwen3_moe", "gemma2"])
def test_the_index_numbers_are_the_full_size_models_own(all_facts, family):
    """Each checkpoint's numbers against transformers' own model of its config, built on the meta device apart
    from nncanon: the parameter count is torch's over that model, the rest its config's fields."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from generator.recipe.family import get_family

    spec = get_family(family)
    for sizes in all_facts[family]["sizes"]:
        raw = dict(spec.checkpoint_config(sizes["checkpoint"]))
        config = AutoConfig.for_model(raw.pop("model_type"), **raw)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        assert sizes["parameters"] == sum(p.numel() for p in model.parameters()), sizes["checkpoint"]
        text = config.get_text_config()
        assert (sizes["blocks"], sizes["width"]) == (text.num_hidden_layers, text.hidden_size)
        assert (sizes["heads"], sizes["kv_heads"]) == (text.num_attention_heads,
                                                      getattr(text, "num_key_value_heads", text.num_attention_heads))
        assert sizes["experts"] == getattr(text, "num_experts", None)
        assert sizes["context"] == text.max_position_embeddings


@pytest.mark.browser
def test_a_numeric_heading_sorts_the_families(site, browser, all_facts):
    _, base = site
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"{base}/families/")
    page.click('.nc-sort[data-key="parameters"]')
    order = page.eval_on_selector_all("table.nc-families tbody tr td:first-child code", "cs => cs.map(c => c.textContent)")
    largest = {n: max(s["parameters"] for s in f["sizes"]) for n, f in all_facts.items()}
    assert [largest[n] for n in order] == sorted(largest.values(), reverse=True)
    assert page.get_attribute('th:has(.nc-sort[data-key="parameters"])', "aria-sort") == "descending"
    page.click('.nc-sort[data-key="parameters"]')
    order = page.eval_on_selector_all("table.nc-families tbody tr td:first-child code", "cs => cs.map(c => c.textContent)")
    assert [largest[n] for n in order] == sorted(largest.values())
    # the order is in the URL: a reload (or a shared link) shows the same
    assert "sort=parameters" in page.url and "order=ascending" in page.url
    page.reload()
    until(page, "document.querySelector('th:has(.nc-sort[data-key=\"parameters\"])').getAttribute('aria-sort') "
                "=== 'ascending'", what="the sort the URL names")
    again = page.eval_on_selector_all("table.nc-families tbody tr td:first-child code", "cs => cs.map(c => c.textContent)")
    assert again == order
    box = page.locator('.nc-sort[data-key="parameters"]').bounding_box()
    assert box["height"] >= 24 and box["width"] >= 24, box  # a target a thumb hits (WCAG 2.5.8)
    page.close()


#: the drawing check's shares (each test a minute at most): two, as long as the families drawing a geometry no
#: family before them drew are under ~60 (39 of 129 today)
_SHARES = 2
#: a drawing as its page lays it out: the box it scrolls in (wide or narrow) and the SVG's own size
_DRAWING = re.compile(r'<div class="(nc-scroll[^"]*)"[^>]*>\s*<svg class="[^"]*\b(?:nc-block|nc-stacks)\b[^"]*"[^>]*'
                      r'\bviewBox="([^"]*)"')


def _drawings(out: Path, families) -> dict[str, list[str]]:
    """Each family's block and stack drawings, by what decides whether one fits: its box's class and its viewBox
    (read from the built page). The column they sit in is the same on every family page (one template, one
    stylesheet), so two drawings of one geometry fit or not alike, whichever family draws them."""
    found = {}
    for family in families:
        html = (out / "families" / family / "index.html").read_text(encoding="utf-8")
        found[family] = sorted({f"{box} {box_of}" for box, box_of in _DRAWING.findall(html)})
    return found


@pytest.mark.browser
@pytest.mark.parametrize("share", range(_SHARES))
def test_no_block_drawing_is_cut_or_shrunk_on_any_family(site, browser, all_facts, share):
    """Every block kind of every family (and an encoder-decoder's stacks): at 1280 px the wide drawing, on a phone
    (375 px) the narrow one, each whole in its box (no sideways scroll) with its labels drawn at 12 px or more.
    Every drawing geometry any family page draws is measured, on the fewest families that together draw them all
    (the kernel cover's greedy choice, ties by name): a family whose drawings all have a measured geometry adds
    nothing to measure. One page load per family, resized between the widths: the drawings are picked by CSS
    media queries, as a turned phone or a narrowed window picks them."""
    from generator.kernel_log import cover

    out, base = site
    drawings = _drawings(out, sorted(all_facts))
    assert all(drawings.values()), [f for f, d in drawings.items() if not d]
    visited = cover(drawings)
    assert {d for f in visited for d in drawings[f]} == {d for ds in drawings.values() for d in ds}
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    failures = []
    for family in visited[share::_SHARES]:
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{base}/families/{family}/")
        until(page, "window.__nncanonReady !== undefined")
        page.evaluate("document.querySelectorAll('.nc-block-figure').forEach(f => f.classList.add('nc-current'))")
        for width in (1280, 375):
            page.set_viewport_size({"width": width, "height": 900})
            until(page, f"window.innerWidth === {width}")
            found = page.eval_on_selector_all(
                ".nc-block-figure .nc-scroll, .nc-stacks-figure .nc-scroll", """els => els.filter(e => e.getClientRects().length).map(e => {
                    const s = e.querySelector('svg'), t = s.querySelector('text');
                    return [(e.closest('.nc-block-figure') || {dataset: {kind: 'the stacks'}}).dataset.kind, e.className,
                            e.scrollWidth - e.clientWidth,
                            parseFloat(getComputedStyle(t).fontSize) * s.getBoundingClientRect().width / s.viewBox.baseVal.width];
                })""")
            assert found, (family, width)
            want = "nc-wide" if width >= 1280 else "nc-narrow"
            for kind, cls, overflow, size in found:
                if want not in cls or overflow > 1 or size < 12:
                    failures.append((family, width, kind, cls, overflow, round(size, 2)))
    context.close()
    assert not failures, failures


@pytest.mark.browser
def test_an_encoder_decoders_stacks_are_live_and_the_slider_indexes_each_stack(site, browser):
    """issue 49 on whisper's page: hovering the decoder's cross-attention in the stacks' drawing lights its
    encoder_states row and printout line; a click pins it; the slider's block 33 is the decoder's block 1 (paths read
    decoder.layers[1]); the encoder's final norm lights its own row. Waits on the page's state only."""
    _, base = site
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/families/whisper/?block=33")
    until(page, "window.__nncanonReady !== undefined")
    until(page, "document.querySelector('.nc-pick-i').textContent === 'i = 1'")
    assert page.eval_on_selector(".nc-block-figure.nc-current .nc-wide .nc-indexed", "t => t.textContent") \
        == "decoder.layers[1].layer_input"
    cross = page.locator(".nc-stacks-figure .nc-wide [data-path='decoder.layers[i].cross_attn']")
    cross.hover()
    until(page, "document.querySelector('tr.nc-lit-main') !== null")
    rows = page.eval_on_selector_all("tr.nc-lit-main", "els => els.map(e => e.dataset.path)")
    assert rows == ["model.decoder.layers[i].cross_attn.encoder_states"], rows
    assert "model.decoder.layers[i].cross_attn" in page.eval_on_selector_all(
        "pre.nc-printout .line.nc-lit", "els => els.map(e => e.dataset.path)")
    page.locator(".nc-stacks-figure .nc-wide [data-path='encoder.norm']").hover()
    until(page, "document.querySelector('tr.nc-lit-main[data-path=\"model.encoder.final_norm_output\"]') !== null")
    cross.click()
    until(page, "document.querySelector('.nc-stacks-figure .nc-part.nc-pinned') !== null")
    until(page, "location.search.includes('part=decoder.layers')")
    assert not errors, errors
    page.close()
