"""The family page's markup for narrow screens and conditional values (no browser, no torch).

Renders the fixture facts (tests/fixtures/facts) and reads the HTML back with html.parser: a
standard name may wrap only before "." and "[" (a <wbr> there, the text unchanged), and a
conditional value says its condition first, then the loads that have it (✓) and those that do
not (✗), exactly as the facts' availability says.
"""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from generator.site.render import render_family  # noqa: E402

FACTS = ROOT / "tests" / "fixtures" / "facts" / "qwen3_5_moe_text.json"


class _Rows(HTMLParser):
    """Each support row (tr[id^=v-]): the classes of its spans in order, with their text."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, list[tuple[str, str]]] = {}
        self.names: list[str] = []  # the host-name cells' code, with "|" for each <wbr>
        self._row = None
        self._stack: list[str] = []
        self._in_name = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and (a.get("id") or "").startswith("v-"):
            self._row = a["data-path"]
            self.rows[self._row] = []
        if tag == "th" and "nc-host-name" in (a.get("class") or ""):
            self._in_name = 1
            self.names.append("")
        elif self._in_name == 1 and tag == "code":
            self._in_name = 2
        if tag == "wbr" and self._in_name == 2:
            self.names[-1] += "|"
        if tag == "span" and self._row:
            self._stack.append(a.get("class") or "")
            self.rows[self._row].append((a.get("class") or "", ""))

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None
        if tag == "code" and self._in_name == 2:
            self._in_name = 0
        if tag == "span" and self._stack:
            self._stack.pop()

    def handle_data(self, data):
        if self._in_name == 2:
            self.names[-1] += data
        if self._row and self._stack:
            cls = next((c for c in reversed(self._stack) if "nc-load nc-" in c or c == "nc-cond"), None)
            if cls:
                self.rows[self._row].append((cls, data))


@pytest.fixture(scope="module")
def facts():
    return json.loads(FACTS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rows(facts):
    parser = _Rows()
    parser.feed(render_family(facts))
    return parser


def test_host_names_wrap_only_before_dots_and_brackets(rows, facts):
    hosts = [h["path"] for h in facts["hosts"]]
    assert [n.replace("|", "") for n in rows.names] == hosts
    for n in rows.names:
        for i, c in enumerate(n):
            if c == "|":
                assert n[i + 1] in ".[", n


def test_a_conditional_value_says_its_condition_then_the_loads_with_and_without_it(rows, facts):
    checked = 0
    for h in facts["hosts"]:
        for v in h["values"]:
            if not (v.get("conditions") and v.get("availability")):
                continue
            spans = rows.rows[f"{h['path']}.{v['name']}"]
            kinds = [c for c, text in spans if text.strip()]
            text = {c: "".join(t for k, t in spans if k == c) for c in ("nc-load nc-yes", "nc-load nc-no")}
            first_load = next(i for i, c in enumerate(kinds) if c.startswith("nc-load"))
            assert "nc-cond" in kinds[:first_load], v["name"]
            have = [k for k, ok in v["availability"].items() if ok]
            lack = [k for k, ok in v["availability"].items() if not ok]
            for cls, loads in (("nc-load nc-yes", have), ("nc-load nc-no", lack)):
                shown = text[cls].split(":", 1)[-1]
                assert [s.strip() for s in shown.split(",") if s.strip()] == loads, (v["name"], cls)
            checked += 1
    assert checked


class _Folds(HTMLParser):
    """Each <details class="nc-fold ...">: its kind, whether it starts open, and the row ids inside it."""

    def __init__(self):
        super().__init__()
        self.folds: list[dict] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details":
            if "nc-fold" in (a.get("class") or "").split():
                self.folds.append({"class": a["class"], "open": "open" in a, "rows": [], "relations": 0})
                self._depth = 1
            elif self._depth:
                self._depth += 1
        elif self._depth and tag == "tr":
            if (a.get("id") or "").startswith("v-"):
                self.folds[-1]["rows"].append(a["id"])
            elif "nc-relations-fold" in self.folds[-1]["class"] and "id" not in a:
                self.folds[-1]["relations"] += 1

    def handle_endtag(self, tag):
        if tag == "details" and self._depth:
            self._depth -= 1


def test_the_support_tables_and_relations_fold_by_host(facts):
    """A fold per host holding exactly that host's rows, and a fold per host holding its relations, all folded on a
    page of many hosts (a link to a row opens its fold: tests/test_browser_mobile.py follows one)."""
    parser = _Folds()
    parser.feed(render_family(facts))
    hosts = [f for f in parser.folds if "nc-host-fold" in f["class"]]
    assert len(hosts) == len(facts["hosts"]) and not any(f["open"] for f in parser.folds)
    for fold, host in zip(hosts, [h for g in ("text", "vision") for h in facts["hosts"]
                                  if h.get("section", "text") == g]):
        assert len(fold["rows"]) == len(host["values"]), host["path"]
    relations = [f for f in parser.folds if "nc-relations-fold" in f["class"]]
    by_host: dict[str, int] = {}
    for r in facts["relations"]:
        by_host[r["host"]] = by_host.get(r["host"], 0) + 1
    # each relation row (plus the fold's one heading row) sits in its host's fold, hosts in first-seen order
    assert [f["relations"] - 1 for f in relations] == list(by_host.values())
