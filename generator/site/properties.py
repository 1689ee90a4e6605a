"""The Properties page: one row per full-size checkpoint a family page covers, the numbers a reader compares models
by (parameters in all and per token, blocks, width, heads, head size, context) beside the family's measured
mechanics, sortable and filtered by the families index's facets (site_templates/assets/families-filter.js).

Every number is the facts' own: read from the checkpoint's model built on the meta device
(``generator.facts.configs.sizes``), its activation from its config.json (the facts' traits), its mechanics the
family's measured traits (``families_index.facets``), so a row never says what its family page does not.
"""

from __future__ import annotations

from generator.site.families_index import FACETS, _count, facet_terms, matches

#: the numeric columns: (key, heading, what the heading's title says)
COLUMNS = (
    ("parameters", "params", "parameters of the full-size model, each shared tensor once, counted on its meta model"),
    ("active", "active", "parameters one token's forward uses: all but the routed experts it is not sent to (the "
                         "embeddings and the head counted whole)"),
    ("blocks", "blocks", "decoder blocks"),
    ("width", "width", "hidden size (the residual stream's width)"),
    ("heads", "heads", "query heads (the key-value heads in the next column)"),
    ("kv_heads", "kv heads", "key-value heads"),
    ("head_dim", "head dim", "the width of one attention head"),
    ("context", "context", "max_position_embeddings as the config declares it"),
)

_SHOW = {"parameters": _count, "active": _count, "width": lambda w: f"{w:,}", "context": lambda c: f"{c:,}"}


def rows(entries: list[dict]) -> list[dict]:
    """One row per checkpoint of every family entry (``families_index.index_entry``), in the index's order."""
    out = []
    for e in entries:
        per_checkpoint = (e.get("traits") or {}).get("checkpoints") or {}
        for s in e.get("sizes") or []:
            cells = {}
            for key, _, _ in COLUMNS:
                value = s.get(key)
                cells[key] = ("—", 0) if value is None else (_SHOW.get(key, str)(value), value)
            own = per_checkpoint.get(s["checkpoint"]) or {}
            out.append({"family": e["family"], "checkpoint": s["checkpoint"], "cells": cells,
                        "activation": own.get("hidden_act") or "—",
                        "tied": {True: "tied", False: "own"}.get(own.get("tie_word_embeddings"), "—"),
                        "facets": e["facets"]})
    return out


def render_properties(env, entries: list[dict]) -> str:
    """The Properties page's markdown."""
    table = rows(entries)
    return env.get_template("properties.md.j2").render(rows=table, columns=COLUMNS, facets=facet_terms(table, FACETS),
                                                      match=matches)
