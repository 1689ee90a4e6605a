"""Facts JSON -> the encyclopedia's mkdocs docs tree, and the strict mkdocs build of it.

The renderer's only input is the facts JSON that ``generator/facts/collect.py`` writes (one file per
family, schema 1). It never imports torch, transformers or nnsight: re-rendering from cached
facts takes seconds. Every text that comes from facts is escaped (:mod:`generator.site.escaping`);
the diagrams' geometry is :mod:`generator.site.diagrams`; and every built page's URLs are checked
after mkdocs has run (:mod:`generator.site.safe_urls`).

Public: :func:`render_family` (facts -> the family page, markdown with inline HTML; :func:`render_family_files`
adds the diagrams' data the page fetches), :func:`render_site` (a facts directory -> the docs tree: ``docs_src/``'s
pages, one page per family, the index, the published facts, ``llms.txt``) and :func:`mkdocs_build` (the docs tree ->
the static site, strict, with a fixed build date and no unsafe URL on any page).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import tempfile
from pathlib import Path

import jinja2
from markupsafe import Markup

from generator.disk import BUILD, room
from generator.ownership import replace_dir
from generator.site.block_diagram import block_diagram
from generator.site.compare import closest, write_compare
from generator.site.config_matrix import config_matrix, layouts
from generator.site.diagrams import Links, block_strip, chain_diagram, diagram_data, served_chain
from generator.site.escaping import (
    UnsafeLinkError,
    escape_markdown,
    escape_markdown_inline,
    ident_breaks,
    ranges,
    slug,
)
from generator.site.families_index import NUMBERS, facet_terms, index_entry, matches
from generator.site.formats import fmt_error, show
from generator.site.interiors import check_order, interior, undrawn
from generator.site.mechanics import mechanics_table
from generator.site.mkdocs_run import MkdocsBuildError, mkdocs_build
from generator.site.page_facts import add_checks
from generator.site.printout import printout_lines
from generator.site.properties import render_properties
from generator.site.recipes_page import write_recipes
from generator.site.recurrent import mixers, summary
from generator.site.releases_page import load_records, releases_page
from generator.site.sae_index import index_rows, render_sae_index
from generator.site.stacks import stacks_context
from generator.site.weights_section import host_sizes, weights_section

#: what tests and callers import from here (some live in generator.site.escaping, .printout)
__all__ = ["FactsError", "MkdocsBuildError", "escape_markdown", "mkdocs_build", "printout_lines", "render_family",
           "render_site"]

ROOT = Path(__file__).resolve().parents[2]
#: the kept release records (python -m generator releases)
RELEASES = ROOT / "releases"
TEMPLATES = ROOT / "site_templates"
DOCS_SRC = ROOT / "docs_src"
MKDOCS_YML = ROOT / "mkdocs.yml"
SCHEMA = 1
# render_site only clears an output directory that it made (that holds this marker) or an empty one.
MARKER = ".nncanon-docs"

REQUIRED = {
    "schema": int,
    "family": str,
    "module": str,
    "lines": list,
    "tagline": str,
    "tags": list,
    "docstring": str,
    "versions": dict,
    "tiny": dict,
    "stack": dict,
    "hosts": list,
    "printout": dict,
    "configs": list,
    "notes": list,
    "identities": list,
}


class FactsError(ValueError):
    """A facts file that the renderer cannot render: says which file, which field, and what to do."""


# ---------------------------------------------------------------- the page


def _check(facts: dict, where: str) -> None:
    for key, typ in REQUIRED.items():
        if key not in facts:
            raise FactsError(
                f"{where}: field {key!r} is missing; re-run `python -m generator build` "
                f"to regenerate the facts"
            )
        if not isinstance(facts[key], typ):
            raise FactsError(
                f"{where}: field {key!r} is a {type(facts[key]).__name__}, expected {typ.__name__}"
            )
    if facts["schema"] != SCHEMA:
        raise FactsError(
            f"{where}: schema {facts['schema']}, this renderer reads schema {SCHEMA}; "
            f"re-run `python -m generator build`"
        )
    for h in facts["hosts"]:
        for v in h.get("values", []):
            for k in ("name", "layout", "description", "read_at"):
                if k not in v:
                    raise FactsError(f"{where}: host {h.get('path')!r} value {v.get('name')!r} has no {k!r}")


def block_kind_summary(facts: dict) -> list[dict]:
    blocks = facts["stack"].get("blocks") or []
    out = []
    for k in facts["stack"].get("block_kinds", []):
        idx = [i for i, b in enumerate(blocks) if b == k["kind"]]
        out.append(
            {"kind": k["kind"], "label": k.get("label") or k["kind"], "count": len(idx), "where": ranges(idx)}
        )
    return out


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=lambda name: name is None or not name.endswith(".txt.j2"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        md=lambda s: Markup(escape_markdown(s or "")),
        mdi=lambda s: Markup(escape_markdown_inline(s)),
        slug=slug,
        ident=ident_breaks,
        show=show,
        err=fmt_error,
        ranges=ranges,
        num=lambda v: f"{v:.1f}".rstrip("0").rstrip("."),
        # a layout's dims with the full-size checkpoint's sizes where it has one (batch, seq stay names)
        sized=lambda dims, sizes: " ".join(str(sizes.get(d, d)) for d in dims),
    )
    env.globals["host_sizes"] = host_sizes
    return env


_ENV: jinja2.Environment | None = None


def _env() -> jinja2.Environment:
    global _ENV
    if _ENV is None:
        _ENV = environment()
    return _ENV


def _proven_rows(relation: dict, paths: set[str]) -> set[str]:
    """The value rows (``model.layers[i].deepstack_output``) a relation proves. A term's list of blocks is a module
    list of its host (``layers[*]``, a vision tower's ``global_layers[*]``) or, where the facts hold no host at that
    path, a list the host computes of some of the stack's blocks (DeepStack's ``deepstack_layers``, the blocks a call
    runs, ``running_layers``): a relation stated on a subset of the blocks means the value on those blocks."""
    rows = set()
    for term in relation["proves"]:
        row = re.sub(r"\[(\*|-?\d+)\]", "[i]", f"{relation['host']}.{term}")
        blocks, _, name = row.rpartition("[i].")
        if blocks and f"{blocks}[i]" not in paths:
            row = f"model.layers[i].{name}"
        rows.add(row)
    return rows


def _meanings(f: dict) -> None:
    """Each value row learns the relations that state its meaning and how its edit was proven; a host
    kind that shares its path with another (a mixed stack) is named with its module class."""
    by_path: dict[str, int] = {}
    by_class: dict[tuple, int] = {}
    for h in f["hosts"]:
        by_path[h["path"]] = by_path.get(h["path"], 0) + 1
        by_class[h["path"], h["class"]] = by_class.get((h["path"], h["class"]), 0) + 1
    proven = {id(r): _proven_rows(r, set(by_path)) for r in f["relations"]}
    for h in f["hosts"]:
        shared = by_path[h["path"]] > 1
        # one module class under two host kinds (mllama's MLP in self- and cross-attention blocks): the host's name
        named = h["class"] if by_class[h["path"], h["class"]] == 1 else h.get("host_class") or h["class"]
        h["anchor"] = f"{h['path']} {named}" if shared else h["path"]
        h["covers"] = ranges(h["blocks"]) if shared and h.get("blocks") else ""
        klass = h.get("host_class")
        for v in h["values"]:
            term = f"{h['path']}.{v['name']}"
            v["meaning"] = list(dict.fromkeys(
                r["text"] for r in f["relations"]
                if (r["class"] == klass and v["name"] in r["proves"]) or term in proven[id(r)]))
            v["edit"] = next((e["reaches"] for e in f["edits"]
                              if e["host"] == h["path"] and e["class"] == klass and e["value"] == v["name"]), None)


def normalize(facts: dict) -> dict:
    """A copy of facts with the schema's optional fields filled in, so the template never guesses."""
    f = copy.deepcopy(facts)
    for key, default in (("vision", None), ("vision_configs", []), ("vision_notes", None), ("saes", None)):
        f.setdefault(key, default)
    f.setdefault("relations", [])
    f.setdefault("edits", [])
    _meanings(f)
    for h in f["hosts"]:
        h.setdefault("class", "")
        for v in h["values"]:
            for key, default in (
                ("dims", []),
                ("conditions", []),
                ("availability", {}),
                ("measured", None),
                ("writable", True),
                ("gradient", None),
                ("transformer_lens", None),
                ("read_line", None),
            ):
                v.setdefault(key, default)
    notes = list(f["notes"])
    if f["vision_notes"]:
        for part in ("shared", "family"):
            f["vision_notes"].setdefault(part, None)
            if f["vision_notes"][part]:
                notes += f["vision_notes"][part].setdefault("notes", [])
    for n in notes:
        n.setdefault("slug", slug(n["title"]))
    for k in f["stack"].get("block_kinds", []):
        k.setdefault("label", k["kind"])
        k.setdefault("mixer", "")
        k.setdefault("identity", None)
        k.setdefault("identity_error", None)
        k.setdefault("adds", [])
        k.setdefault("relations", [])
    if f["vision"]:
        for key, default in (("facts", []), ("identity", None), ("identity_error", None), ("adds", []), ("relations", []), ("line", ""),
                             ("num_layers", None)):
            f["vision"].setdefault(key, default)
    for c in f["configs"] + f["vision_configs"]:
        for key in ("also", "accessors", "raw", "inferred"):
            c.setdefault(key, [])
    if f["saes"]:
        for key, default in (("markdown", ""), ("releases", []), ("verified", ""), ("sparsity", "k")):
            f["saes"].setdefault(key, default)
    return f


def page_context(facts: dict, interiors: bool = True) -> dict:
    """What the family page's template reads. ``interiors=False`` leaves every block's inside out (only
    bench/bench_page.py asks, to weigh the page with and without them side by side)."""
    facts = normalize(facts)
    inside = interior if interiors else lambda *_args, **_kw: {"runs": [], "boxes": [], "edges": []}
    lookup = {(h["path"], v["name"]): v for h in facts["hosts"] for v in h["values"]}
    kinds = facts["stack"].get("block_kinds", [])
    kind_names = [k["kind"] for k in kinds]
    summary = {s["kind"]: s for s in block_kind_summary(facts)}
    printout = printout_lines(facts["printout"].get("text", ""))
    links = Links.of(facts, printout)
    blocks = [
        {
            "kind": k,
            "summary": summary[k["kind"]],
            "n": n,
            "diagram": block_diagram(
                k.get("parts", []), k["adds"], lookup, f"part-{slug(k['kind'])}", links
            ),
            "interior": inside(k, lookup, links, f"part-{slug(k['kind'])}-in"),
        }
        for n, k in enumerate(kinds)
    ]
    for b in blocks:
        check_order(facts["family"], f"page.block_kinds.{b['kind']['kind']}", b["kind"].get("sequence") or [],
                    b["diagram"]["edges"] + b["interior"]["edges"], b["kind"].get("dataflow") or [])
    marked = [dict(m, where="blocks " + ranges(m["blocks"])) for m in facts["stack"].get("marked") or []]
    vision = facts.get("vision")
    vision_ctx = None
    if vision:
        vision_ctx = {
            "chain": chain_diagram(vision.get("chain", []), "vchain", links, "model.vision"),
            "block": block_diagram(vision.get("parts", []), vision["adds"], lookup, "part-vision", links,
                                   root="vision.layers[i]")
            if vision.get("parts")
            else None,
            "interior": inside(vision, lookup, links, "part-vision-in", "vision"),
        }
        check_order(facts["family"], "page.vision", vision.get("sequence") or [],
                    (vision_ctx["block"] or {}).get("edges", []) + vision_ctx["interior"]["edges"],
                    vision.get("dataflow") or [])
    hosts = [h for h in facts["hosts"] if h.get("section", "text") != "vision"]
    vhosts = [h for h in facts["hosts"] if h.get("section", "text") == "vision"]
    chain = chain_diagram(served_chain(facts), "chain", links)
    two = stacks_context(facts, links, hosts)  # an encoder-decoder's stacks are drawn in place of the one chain
    # a block is drawn twice (wide and narrow): both drawings' parts are on the page
    drawn = [(None, d) for d in ((two["drawing"]["wide"], two["drawing"]["narrow"]) if two else (chain,))] + [(b["kind"]["kind"], d) for b in blocks
                               for d in (b["diagram"]["wide"], b["diagram"]["narrow"], b["interior"])]
    if vision_ctx:
        block = vision_ctx["block"]
        drawn += [(None, d) for d in (vision_ctx["chain"], *((block["wide"], block["narrow"]) if block else ()),
                                      vision_ctx["interior"]) if d]
    drawn_rows = {box.value_row for _, d in drawn for box in d["boxes"] if box.value_row}
    return {
        "f": facts,
        "source": facts["module"].replace(".", "/") + ".py",
        "chain": chain,
        "strip": block_strip(facts["stack"].get("blocks") or [], kind_names, marked),
        "marked": marked,
        "undrawn": undrawn(facts, drawn_rows),
        "blocks": blocks,
        "vision": vision_ctx,
        "host_groups": [g for g in (*(two["groups"] if two else [("text", None, hosts)]), ("vision", vision, vhosts))
                        if g[2]],
        "stacks": two,
        "relation_groups": by_host(facts["relations"]),
        # a page of one host has nothing to fold away
        "fold_open": len(facts["hosts"]) == 1,
        "printout": printout,
        "config": config_matrix(facts["configs"]),
        "vision_config": config_matrix(facts["vision_configs"]),
        "layouts": layouts(facts),
        "diagram_json": diagram_data(facts, lookup, drawn, two and two["data"]),
        "docstring": [p.strip() for p in re.split(r"\n\s*\n", facts["docstring"].strip()) if p.strip()],
        "weights": weights_section(facts),
        "saelens": index_rows([facts])[0],
    }


def by_host(relations: list[dict]) -> list[tuple[str, list[dict]]]:
    """The relations grouped by the host they are stated on, hosts in the order they first come."""
    groups: dict[str, list[dict]] = {}
    for r in relations:
        groups.setdefault(r["host"], []).append(r)
    return list(groups.items())


def render_family(facts: dict, interiors: bool = True, closest: str | None = None) -> str:
    """The family page: mkdocs markdown with inline HTML, sections in the reference page's order. ``closest``: the
    family its Compare link pairs it with (``compare.closest``; none on a page rendered alone)."""
    return render_family_files(facts, interiors, closest)[0]


def render_family_files(facts: dict, interiors: bool = True, closest: str | None = None) -> tuple[str, str]:
    """The family page and its diagrams' data (``facts/<family>.diagram.json``, which the page's script fetches)."""
    _check(facts, f"facts of {facts.get('family', '?')}")
    try:
        context = page_context(facts, interiors)
        return _env().get_template("family.md.j2").render(**context, closest=closest), context["diagram_json"]
    except UnsafeLinkError as e:
        notes = [n for n in facts["notes"] if e.url in n.get("markdown", "")]
        where = f" note {notes[0].get('title')!r}" if notes else ""
        raise FactsError(f"families/{facts['family']}.notes.md{where}: {e}; fix the link") from None


# ---------------------------------------------------------------- the site


def _dump(obj) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def load_facts(facts_dir: Path, families: list[str] | None = None) -> list[dict]:
    """The facts of ``families`` (default: every <family>.json in facts_dir), sorted by family, checked.

    The build passes the registered families (``families/*.yaml``), so the facts of a family whose
    YAML was removed, still in the cache, are not published.
    """
    if families is None:
        files = sorted(p for p in Path(facts_dir).glob("*.json") if p.name != "index.json")
    else:
        files = [Path(facts_dir) / f"{name}.json" for name in sorted(families)]
        missing = [p.name for p in files if not p.exists()]
        if missing:
            raise FactsError(
                f"{facts_dir}: no facts for {', '.join(missing)}; run `python -m generator build` first"
            )
    if not files:
        raise FactsError(f"{facts_dir}: no <family>.json facts files; run `python -m generator build` first")
    out = []
    for p in files:
        try:
            facts = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise FactsError(
                f"{p}: not valid JSON ({e}); delete it and re-run `python -m generator build`"
            ) from e
        _check(facts, str(p))
        if facts["family"] != p.stem:
            raise FactsError(f"{p}: field 'family' is {facts['family']!r} but the file is named {p.name}")
        out.append(facts)
    return out


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not (out_dir / MARKER).exists() and any(out_dir.iterdir()):
        raise FileExistsError(
            f"{out_dir} exists and was not made by render_site (no {MARKER}); pass an empty or new directory"
        )


def render_site(facts_dir: Path, out_dir: Path, families: list[str] | None = None,
                transformer_lens: dict[str, dict] | None = None, interiors: bool = True,
                releases_dir: Path | None = None, survey: Path | None = None) -> None:
    """Write the whole docs tree into out_dir (replacing it): deterministic, byte for byte.

    Only ``families`` are rendered (default: every facts file in facts_dir); the Coverage page from the
    survey's rows in ``survey`` (generator/survey; an empty page without). The tree is written
    into a fresh ``.tmp-<name>-*`` beside out_dir and swapped in (:func:`replace_dir`), so a kill
    at any moment leaves out_dir either the old tree or the new one, never a half-deleted one.
    """
    facts_dir, out_dir = Path(facts_dir), Path(out_dir)
    loaded = load_facts(facts_dir, families)
    records = load_records(RELEASES if releases_dir is None else releases_dir)
    add_checks(loaded, facts_dir, transformer_lens, records)
    _check_out_dir(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".tmp-{out_dir.name}-", dir=out_dir.parent))
    staged.chmod(0o755)
    try:
        with room(out_dir.parent, BUILD):
            _write_tree(loaded, staged, interiors, survey, facts_dir.parent / "docs_run" / "recipes")
            declared = {f["family"]: f["releases"] for f in loaded if f.get("releases")}
            (staged / "releases.md").write_text(releases_page(records, declared), encoding="utf-8")
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    replace_dir(staged, out_dir)


def _write_tree(families: list[dict], out_dir: Path, interiors: bool = True, survey: Path | None = None,
                recipe_runs: Path | None = None) -> None:
    (out_dir / MARKER).write_text("made by generator/site/render.py; replaced on every render\n")
    for src in sorted(DOCS_SRC.rglob("*")):
        if src.is_file():
            dst = out_dir / src.relative_to(DOCS_SRC)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    assets = TEMPLATES / "assets"
    for src in sorted(assets.rglob("*")):
        if src.is_file():
            dst = out_dir / "assets" / src.relative_to(assets)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    write_recipes(out_dir / "recipes.md", [f["family"] for f in families], recipe_runs)  # each recipe's families
    (out_dir / "families").mkdir()
    (out_dir / "facts").mkdir()
    entries = [index_entry(f, block_kind_summary(f)) for f in families]
    env = _env()
    near = closest(families)
    for facts in families:
        page, data = render_family_files(facts, interiors, near.get(facts["family"]))
        (out_dir / "families" / f"{facts['family']}.md").write_text(page, encoding="utf-8")
        (out_dir / "facts" / f"{facts['family']}.diagram.json").write_text(data, encoding="utf-8")
        (out_dir / "facts" / f"{facts['family']}.json").write_text(_dump(facts), encoding="utf-8")
    (out_dir / "families" / "index.md").write_text(
        env.get_template("families_index.md.j2").render(entries=entries, facets=facet_terms(entries), numbers=NUMBERS,
                                                        match=matches), encoding="utf-8"
    )
    (out_dir / "properties.md").write_text(render_properties(env, entries), encoding="utf-8")
    write_compare(env, out_dir, families, entries)
    (out_dir / "sae-index.md").write_text(render_sae_index(env, families), encoding="utf-8")
    (out_dir / "mechanics.md").write_text(
        env.get_template("mechanics.md.j2").render(mechanics=mechanics_table(families)), encoding="utf-8"
    )
    found = mixers(families)
    (out_dir / "recurrent.md").write_text(
        env.get_template("recurrent.md.j2").render(mixers=found, summary=summary(found)), encoding="utf-8"
    )
    (out_dir / "facts" / "index.json").write_text(
        _dump({"schema": SCHEMA, "families": entries}), encoding="utf-8"
    )
    from generator.site.coverage import render_coverage

    rendered = {facts["family"] for facts in families}
    (out_dir / "coverage.md").write_text(render_coverage(env, survey, rendered, {f["family"]: f for f in families}),
                                         encoding="utf-8")
    (out_dir / "llms.txt").write_text(
        env.get_template("llms.txt.j2").render(entries=entries), encoding="utf-8"
    )
