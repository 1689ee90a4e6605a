"""Why a host has no attribute ``name``: one line naming what exists instead and the fix.

Asked by `Host.__getattr__` when nnsight finds neither a child, a value nor a module attribute. In turn:
the family's own explanation (a hybrid block's other mixer); a block asked for a mixer it does not have
(``.self_attn`` on a Mamba-2 block, whose mixer is ``.mixer``); a standard value served on another kind of
host of this model, or only by other families (found by reading the family modules' source, so no family
is imported to say it); a TransformerLens or nnterp name (`nncanon.guards.other_names`), said with its standard
name; a misspelling, with the host's closest names by edit distance; anything else, with what the host has and
``model.support()``. A name starting with an underscore (Python's and nnsight's own lookups) stays nnsight's bare
AttributeError.
"""

from __future__ import annotations

import ast
import difflib
from pathlib import Path
from typing import Any

from ..core.hosts import index, pattern
from .other_names import standard_name


def _a(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def explain(model: Any, envoy: Any, name: str) -> str | None:
    family = getattr(model.family_module, "explain_missing", None)
    message = family(model, envoy, name) if family else None
    if message or "_bound" not in model.__dict__:  # mid-build: the host kinds are not all known yet
        return message
    if name.startswith("_"):
        return None
    return (_mixer(model, envoy, name) or _weight(model, envoy, name) or _standard(model, envoy, name)
            or _elsewhere(model, envoy, name) or _other_library(envoy, name) or _unknown(envoy, name))


def _weight(model: Any, envoy: Any, name: str) -> str | None:
    """A standard weight (W_Q, W_in, ...) asked of a host that has none: a state-space or DeltaNet mixer, a
    block. Says which hosts carry it (nncanon.weights)."""
    from ..research.weights import _ALL

    if name not in _ALL:
        return None
    where = {"W_E": "the model", "W_U": "the model", "b_U": "the model"}.get(name)
    stem = getattr(_ALL[name], "stem", None)  # a norm's gain or bias: on the host of the norm's output value
    where = where or (stem and f"the host serving {stem}_output (a block, the model)")
    where = where or ("a block's mlp" if name.endswith(("_in", "_gate", "_out")) else "a softmax attention (self_attn)")
    return (f"{envoy._std_path}.{name} is unavailable on {model.family}: {_this(envoy)} has no {name}; the standard "
            f"weights are views of projections nncanon maps, and {name} is on {where}"
            + (" (a DeltaNet or state-space mixer's projections mix heads and gates in ways no W_Q/W_K/W_V states)"
               if name in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V", "W_O", "b_O") else ""))


def _this(envoy: Any) -> str:
    """``block 3's self_attn (LlamaAttention)``, or ``model.norm (LlamaRMSNorm)`` for a host with no index."""
    native = type(envoy._module).__name__
    block = index(envoy._std_path)
    if block is None:
        return f"{envoy._std_path} ({native})"
    return f"block {block}'s {envoy._std_path.split(']', 1)[1].lstrip('.') or 'module'} ({native})"


def _mixer(model: Any, envoy: Any, name: str) -> str | None:
    """A block asked for a token mixer it does not have: say the one it has."""
    own = getattr(type(envoy), "MIXERS", None)
    if own is None or name in own or name not in _mixer_names():
        return None
    has = [m for m in own if m in envoy._aliases or any(n == m for n, _ in envoy._named_children())]
    has = has or list(own)
    kind = type(getattr(envoy, has[0])).kind() if hasattr(envoy, has[0]) else "mixer"
    return (f"{envoy._std_path} has no {name}: this {model.family} model's blocks mix tokens with "
            f"{has[0]} ({_a(kind)}); read {envoy._std_path}.{has[0]}")


def _mixer_names() -> set[str]:
    from ..core.hosts import Host

    names, stack = {"attn", "attention", "mixer", "self_attn", "linear_attn"}, [Host]
    while stack:
        cls = stack.pop()
        names.update(getattr(cls, "MIXERS", ()) or ())
        stack.extend(cls.__subclasses__())
    return names


def _standard(model: Any, envoy: Any, name: str) -> str | None:
    """``name`` is a value of another kind of host of this model."""
    path = pattern(envoy._std_path)
    kinds = model.host_kinds()
    this = _this(envoy)
    same = [k for k in kinds if k.host == path and k.has(name)]
    if same:
        where = "; ".join(f"the {k.cls.kind()} ({k.native}) of {k.covers or k.host}" for k in same)
        return f"{envoy._std_path} has no {name}: {name} is on {where}; {this} is {_a(type(envoy).kind())}"
    owners = list(dict.fromkeys(k.host for k in kinds if k.has(name)))
    if owners:
        return (f"{envoy._std_path} ({type(envoy._module).__name__}) has no value {name!r}: {name} is served on "
                f"{', '.join(owners)}")
    return None


def _elsewhere(model: Any, envoy: Any, name: str) -> str | None:
    """``name`` is a value only other kinds of host or other families serve: say which."""
    owners = _serving().get(name)
    if not owners:
        return None
    kind = type(envoy).kind()
    other = next((k for _, _, k in owners if k is not None and k != kind), None)
    if other is not None:  # a dense MLP asked for router_logits: the kind of host says it
        return (f"{envoy._std_path} has no {name}: {_this(envoy)} is {_a(kind)}; {name} is a value of "
                f"{_a(other)}, which this {model.family} model has on no block")
    hosts = sorted({f"{module}'s {cls}" for module, cls, _ in owners})
    return (f"{envoy._std_path} has no {name}: {name} is a value of {', '.join(hosts)} host"
            f"{'s' if len(hosts) > 1 else ''}; this {model.family} model's {kind} "
            f"({type(envoy._module).__name__}) does not compute it (model.support() lists what it has)")


_SERVING: dict = {}  # a plain dict, not an lru_cache: shipped code must pickle by value (tests/test_remote.py)


def _serving() -> dict[str, list[tuple[str, str, str | None]]]:
    """Value name -> (module, host class, its KIND or None) for every ``Value("name", ...)`` a ``host("Class", ...)``
    call declares in a family or part module (inline, or in a module-level list it names): read from the source,
    as `nncanon.families.model_types_of` reads MODEL_TYPES, so no family is imported to say it."""
    if not _SERVING:
        _SERVING.update(_scan())
    return _SERVING


def _scan() -> dict[str, list[tuple[str, str, str | None]]]:
    found: dict[str, list[tuple[str, str, str | None]]] = {}
    root = Path(__file__).parents[1]  # nncanon/
    families = {path.stem: ast.parse(path.read_text(encoding="utf-8")) for path in sorted((root / "families").glob("*.py"))}
    # a host a shared part declares is owned by the families that import it (deepseek_v2 and deepseek_v3 import
    # parts/attention/latent.py's LatentAttention): a user knows families, not the part's file
    users: dict[tuple[str, str], list[str]] = {}
    for family, tree in families.items():
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("parts."):
                for alias in node.names:
                    users.setdefault((node.module.rsplit(".", 1)[-1], alias.name), []).append(family)
    parts = {path.stem: ast.parse(path.read_text(encoding="utf-8")) for path in sorted((root / "parts").rglob("*.py"))}
    for stem, tree in [*families.items(), *parts.items()]:
        lists = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)}
        for node in ast.walk(tree):
            if not (_called(node, "host") and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            kind = keywords.get("KIND")
            kind = kind.value if isinstance(kind, ast.Constant) else None
            declared = keywords.get("values")
            scopes = [declared, *(lists.get(n.id) for n in ast.walk(declared) if isinstance(n, ast.Name))] \
                if declared is not None else []
            for scope in filter(None, scopes):
                for inner in ast.walk(scope):
                    if _called(inner, "Value") and inner.args and isinstance(inner.args[0], ast.Constant):
                        owner = _listed(users.get((stem, node.args[0].value), [])) or stem
                        entry = (owner, node.args[0].value, kind)
                        found.setdefault(inner.args[0].value, [])
                        if entry not in found[inner.args[0].value]:
                            found[inner.args[0].value].append(entry)
    return found


def _called(node: ast.AST, function: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function


def _other_library(envoy: Any, name: str) -> str | None:
    """A TransformerLens or nnterp name: the standard one, on this block where the user asked on one."""
    found = standard_name(name)
    if found is None:
        return None
    library, theirs, standard = found
    block = index(envoy._std_path)
    here = standard.replace("[i]", f"[{block}]") if block is not None else standard
    theirs = theirs.replace("{i}", "i" if block is None else str(block))
    return (f"{envoy._std_path} has no {name}: {theirs} is {library}'s name; the standard name is {here}"
            + (" (one per block)" if "[i]" in here else ""))


def _unknown(envoy: Any, name: str) -> str:
    """A name no host of any family serves: a misspelling of one of this host's names (closest by edit distance),
    or else what this host has."""
    own = [v.name for v in type(envoy).values()]
    own += [n for n, _ in envoy._named_children()] + list(getattr(envoy, "_aliases", None) or ())
    own = list(dict.fromkeys(own))
    close = difflib.get_close_matches(name, own, n=3, cutoff=0.75)
    path = envoy._std_path
    if close:
        return (f"{path} has no {name}; did you mean {' or '.join(f'{path}.{c}' for c in close)}? "
                "(print(model.support()) lists every value and where it is read)")
    has = ", ".join(own[:12]) + (", ..." if len(own) > 12 else "")
    return (f"{path} ({type(envoy._module).__name__}) has no {name!r}: it is neither a standard value nor a child or "
            f"attribute of the module; it has {has or 'no standard names'} (print(model.support()) lists every value)")


def _listed(names: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + (names[-1] if names else "")
