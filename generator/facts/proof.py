"""The build's proof of meaning: every relation of every host, on every block, under every load.

A host class's ``RELATIONS`` (``nncanon.core.relations``) state what its values mean. Here each relation
is applied to every envoy of its class on the tiny checkpoint, under each load the page talks about
(a relation whose terms a load cannot serve is skipped there, and says so); its terms are read in
one trace per term pattern (a term on every block at once, in block order, so reads follow the
forward), and both sides computed by the module's math must agree within the relation's tolerance.
Then every value a load serves must be proven by some relation: a name whose meaning nobody stated
fails the build, naming the value.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from generator.facts.claim_error import ClaimError
from generator.recipe.family import Family

#: module attributes a term may end in besides a value
MODULE_IO = ("input", "inputs", "output")
_PART = re.compile(r"^(\w+)(?:\[(-?\d+|\*)\])?$")


class RelationError(ClaimError):
    """A relation does not hold, cannot be read, or a value has none; the message names it."""


def pattern(path: str) -> str:
    """``model.layers[3].mlp`` -> ``model.layers[i].mlp``."""
    return re.sub(r"\[\d+\]", "[i]", path)


def block_of(path: str) -> int | None:
    found = re.search(r"layers\[(\d+)\]", path)
    return int(found.group(1)) if found else None


def path_of(envoy: Any) -> str:
    """An envoy's standard path (a host's), else nnsight's."""
    return getattr(envoy, "_std_path", "") or envoy.path


def envoys(model: Any) -> list[Any]:
    """The root and every host envoy, in tree order, each once."""
    seen, out = set(), []
    for envoy in [model, *model._hosts]:
        if id(envoy) not in seen:
            seen.add(id(envoy))
            out.append(envoy)
    return out


def mixer_of(envoy: Any) -> str | None:
    # not None: a block may keep the mixer it lacks as a None attribute (granitemoehybrid's self_attn / mamba)
    return next((name for name in getattr(type(envoy), "MIXERS", ()) if getattr(envoy, name, None) is not None), None)


def relations_of(envoy: Any) -> list[Any]:
    from nncanon.parts.weights import relations as weight_relations

    mixer = mixer_of(envoy)
    # a host's weights (nncanon.weights) bring the relations that prove them, built for its module
    return [relation.on(mixer) for relation in getattr(type(envoy), "RELATIONS", ())] + weight_relations(envoy)


def targets(model: Any, envoy: Any, term: str) -> tuple[list[Any], str, bool]:
    """The envoys a term reads on, its attribute, and whether it is a list over every block."""
    *parts, attr = term.split(".")
    current: list[Any] = [envoy]
    many = False
    if parts and parts[0] == "model":
        current, parts = [model], parts[1:]
    for part in parts:
        name, index = _PART.match(part).groups()
        nxt = []
        for node in current:
            child = getattr(node, name)
            if index == "*":
                nxt.extend(child[i] for i in range(len(child)))
                many = True
            elif index is not None:
                nxt.append(child[int(index)])
            else:
                nxt.append(child)
        current = nxt
    return current, attr, many


def unavailable(model: Any, envoy: Any, attr: str) -> str | None:
    """Why the load cannot serve ``attr`` on ``envoy`` (None: it can)."""
    if attr in MODULE_IO:
        return None
    value = next((v for v in type(envoy).values() if v.name == attr), None)
    if value is None:
        return f"{envoy._std_path} has no value {attr!r}"
    for condition in value.conditions:
        if not condition.holds(model):
            return condition.why if not condition.needs else condition.message(attr)
    return None


def _snapshot(x: Any) -> Any:
    """A copy that later in-place writes of the forward cannot change."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (tuple, list)):
        return type(x)(_snapshot(item) for item in x)
    if isinstance(x, dict):
        return {key: _snapshot(item) for key, item in x.items()}
    return x


def read_all(model: Any, wanted: dict[tuple[str, str], Any], args: tuple, kwargs: dict) -> dict[tuple[str, str], Any]:
    """Every (envoy path, attr) of ``wanted`` ({key: envoy}) in one forward: the inputs in the first invoke, and
    one empty invoke per read, which nnsight runs as its own worker over the same batch, so the reads need no
    order among them (a single invoke must read in the order the forward produces, which a relation's terms do
    not follow). One forward instead of one per (path pattern, attr): the relations' share of a collect."""
    import torch

    read: dict[tuple[str, str], Any] = {}
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(*args, **kwargs):
            pass
        for key, envoy in wanted.items():
            with tracer.invoke():
                read[key] = _snapshot(getattr(envoy, key[1]))
    return read


@dataclass
class Checked:
    """One relation of one host pattern: where it held, by how much, and where it could not run."""

    host: str
    cls: str
    text: str
    proves: list[str]
    adds: list[str] | None
    errors: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    blocks: set[int] = field(default_factory=set)
    tolerance: float = 0.0
    exact: bool = True

    def fact(self) -> dict:
        return {"host": self.host, "class": self.cls, "text": self.text, "proves": self.proves, "adds": self.adds,
                "errors": {k: _bound(v if self.exact else max(v, 1e-30), self.tolerance) for k, v in sorted(self.errors.items())},
                "skipped": dict(sorted(self.skipped.items())), "blocks": sorted(self.blocks)}


def _bound(error: float, tolerance: float) -> str:
    """What the page may say of an error on every CPU: exact, or within the relation's tolerance. (The
    digits of a rounding error depend on the CPU's kernels; the facts, and so the site, must not.)"""
    return "0" if error == 0.0 else f"≤ {tolerance:g}"


def planned(family: Family, model: Any, label: str, results: dict[tuple, Checked],
            served: dict[tuple[str, str], set[str]]) -> tuple[list, dict]:
    """Every relation of every envoy of ``model`` the load ``label`` serves the terms of, with its terms'
    targets, and the reads they need (``read_all``'s ``wanted``); one it cannot serve is marked skipped."""
    plan = []  # (envoy, relation, {term: (envoys, attr, many)}, checked)
    wanted: dict[tuple[str, str], Any] = {}
    for envoy in envoys(model):
        cls = type(envoy)
        for value in cls.values():
            if unavailable(model, envoy, value.name) is None:
                served[(cls.__name__, value.name)].add(label)
        for relation in relations_of(envoy):
            key = (pattern(envoy._std_path), cls.__name__, relation.text)
            checked = results.setdefault(key, Checked(pattern(envoy._std_path), cls.__name__, relation.text,
                                                      list(relation.proves), list(relation.adds or []) or None,
                                                      tolerance=relation.tolerance, exact=relation.exact))
            terms, why = {}, None
            for term in relation.reads:
                try:
                    found = targets(model, envoy, term)
                except (AttributeError, IndexError) as error:
                    raise RelationError(family.family, f"relation {relation.text!r} on {envoy._std_path}",
                                        f"its term {term!r} does not resolve: {error}") from None
                terms[term] = found
                why = why or next((w for e in found[0] if (w := unavailable(model, e, found[1]))), None)
            if why is not None:
                checked.skipped.setdefault(label, f"{why}")
                continue
            plan.append((envoy, relation, terms, checked))
            for found, attr, _ in terms.values():
                for target in found:
                    wanted[(path_of(target), attr)] = target
    return plan, wanted


def measured(plan: list, read: dict[tuple[str, str], Any]) -> Any:
    """Each planned relation with its largest error over its pairs, computed from ``read``; a relation whose
    compute raises gives the exception in its place."""
    from nncanon.core.relations import error as relative_error

    for envoy, relation, terms, checked in plan:
        reads = {term: ([read[(path_of(t), attr)] for t in found] if many else read[(path_of(found[0]), attr)])
                 for term, (found, attr, many) in terms.items()}
        try:
            pairs = relation.compute(envoy, reads)
        except Exception as error:  # a relation that cannot be computed is a wrong claim
            yield envoy, relation, terms, checked, error
            continue
        yield envoy, relation, terms, checked, max((relative_error(computed, got) for computed, got in pairs),
                                                   default=0.0)


def prove(family: Family, model: Any, label: str, args: tuple, kwargs: dict,
          results: dict[tuple, Checked], proven: dict[tuple[str, str], set[str]],
          served: dict[tuple[str, str], set[str]]) -> None:
    """Check every relation on every envoy of ``model`` under the load ``label`` (already entered)."""
    plan, wanted = planned(family, model, label, results, served)
    read = read_all(model, wanted, args, kwargs)
    failed: dict[str, str] = {}  # every relation that does not hold, reported together
    for envoy, relation, terms, checked, worst in measured(plan, read):
        if isinstance(worst, Exception):
            failed.setdefault(repr(relation.text), f"cannot be computed on {envoy._std_path} under {label}: "
                                             f"{type(worst).__name__}: {worst}")
            continue
        if not worst <= relation.tolerance:
            failed.setdefault(repr(relation.text), f"does not hold on {envoy._std_path} under {label}: off by {worst:.3g} "
                                             f"(tolerance {relation.tolerance:g}, relative to the value's scale)")
            continue
        checked.errors[label] = max(checked.errors.get(label, 0.0), worst)
        checked.skipped.pop(label, None)
        if (index := block_of(envoy._std_path)) is not None:
            checked.blocks.add(index)
        for term in relation.proves:
            found, attr, _ = terms.get(term) or targets(model, envoy, term)
            for target in found:
                proven[(type(target).__name__, attr)].add(label)
    if failed:
        raise RelationError(family.family, "relations", listed(failed, "does not hold", "do not hold", ""))


def listed(problems: dict[str, str], one: str, many: str, where: str) -> str:
    """Every problem on its own line under one heading: the contributor sees them all in one run."""
    count = f"{len(problems)} {many}" if len(problems) > 1 else f"1 {one}"
    return f"{count}{' ' * bool(where)}{where}:\n" + "\n".join(f"{name} {problem}" for name, problem in problems.items())


def check_coverage(family: Family, proven: dict, served: dict, hosts: dict[str, str]) -> None:
    """Every value some load serves is proven by a relation under some load."""
    unproven = {f"{hosts.get(cls, cls)}.{name}": f"(served under {', '.join(sorted(loads))}): add one to "
                                                  f"{cls}.RELATIONS" for (cls, name), loads in sorted(served.items())
                if not proven.get((cls, name))}
    if unproven:
        raise RelationError(family.family, "values", listed(unproven, "value has no relation stating what it means",
                                                            "values have no relation stating what they mean",
                                                            "(nncanon/core/relations.py shows the shared ones)"))


def prove_family(family: Family, models: Any, loads: list, inputs: Any) -> list[dict]:
    """Check every relation under every load; the facts the page shows. ``inputs(model)`` gives the
    trace arguments of a load's model."""
    results: dict[tuple, Checked] = {}
    proven: dict[tuple[str, str], set[str]] = defaultdict(set)
    served: dict[tuple[str, str], set[str]] = defaultdict(set)
    hosts: dict[str, str] = {}
    for load in loads:
        model = models.get(load.label)
        with load.within(model):
            for envoy in envoys(model):
                hosts.setdefault(type(envoy).__name__, pattern(envoy._std_path))
            args, kwargs = inputs(model)
            prove(family, model, load.label, args, kwargs, results, proven, served)
    check_coverage(family, proven, served, hosts)
    return [checked.fact() for checked in results.values()]
