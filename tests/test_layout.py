"""The tree reads as the pipeline: no import circles, each generator stage imports only the stages before it,
the site stage reaches neither the library nor torch, and docs_src/contributing.md's map names every module."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

from import_graph import REPO, circles, graph, modules

STAGES = ("recipe", "checkpoint", "notes", "facts", "survey", "site")
#: generator modules outside the stages: the command line, the whole build and ``new`` (contribute; factory, which
#: starts from the survey and the Coverage page's closest-family match) run every stage; the
#: directories' ownership and the shared caches' lock are utilities any stage that writes may use, the kernel log one
#: any stage that runs torch may
ORCHESTRATORS = {"generator", "generator.__main__", "generator.build", "generator.contribute", "generator.factory"}
UTILITIES = {"generator.ownership", "generator.shared_rows", "generator.disk", "generator.kernel_log"}


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_no_import_circles():
    found = circles(graph("nncanon", "generator"))
    assert not found, "import circles (each a set of modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_each_stage_imports_only_the_stages_before_it():
    edges = graph("nncanon", "generator")
    wrong = []
    for module, imported in sorted(edges.items()):
        stage = _stage(module)
        if module.startswith("generator.") and stage is None and module not in ORCHESTRATORS | UTILITIES:
            wrong.append(f"{module} belongs to no stage")
        if stage is None:
            if module.startswith("nncanon") and any(m.startswith("generator") for m in imported):
                wrong.append(f"{module} (the library) imports the generator")
            continue
        for other in sorted(imported):
            if other in ORCHESTRATORS:
                wrong.append(f"{module} imports {other}, which runs the stages")
            theirs = _stage(other)
            if theirs is not None and STAGES.index(theirs) > STAGES.index(stage):
                wrong.append(f"{module} ({stage}) imports {other} ({theirs}), a later stage")
            if stage == "site" and other.startswith("nncanon"):
                wrong.append(f"{module} (site) imports the library ({other}): pages come from the facts JSON alone")
    assert not wrong, "\n".join(wrong)


def test_the_site_stage_imports_no_torch():
    """Every module of generator/site imported in a fresh interpreter: none pulls torch (or the library) in."""
    names = sorted(m for m in modules("generator/site") if m != "generator.site")
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); import importlib\n"
            f"for name in {names!r}: importlib.import_module(name)\n"
            "pulled = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'nncanon', 'transformers'))\n"
            "assert not pulled, pulled[:5]")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_parts_and_families_are_apart():
    """nncanon/families holds family modules only (each declares FAMILY); the shared parts declare none."""
    families = REPO / "nncanon" / "families"
    for path in sorted(families.glob("*.py")):
        if path.name != "__init__.py":
            assert re.search(r"^FAMILY = ", path.read_text(encoding="utf-8"), re.M), f"{path.name} is not a family module"
    for path in sorted((REPO / "nncanon" / "parts").rglob("*.py")):
        assert not re.search(r"^FAMILY = ", path.read_text(encoding="utf-8"), re.M), f"{path} declares a family"


def _map() -> dict[str, set[str]]:
    """contributing.md's "The code": each bulleted folder and the modules named in its bullet."""
    text = (REPO / "docs_src" / "contributing.md").read_text(encoding="utf-8")
    section = text.split("## The code", 1)[1].split("\n## ", 1)[0]
    named: dict[str, set[str]] = {}
    for bullet in re.split(r"\n- ", section):
        folder = re.match(r"`([\w/]+/)`", bullet.strip().lstrip("- "))
        if folder:
            named.setdefault(folder.group(1), set()).update(re.findall(r"`([\w]+\.py)`", bullet))
    return named


def test_the_contributing_map_matches_the_tree():
    named = _map()
    # every package of the library and the generator, found on disk: a new folder must be mapped too
    expected = {f"{p.parent.relative_to(REPO).as_posix()}/" for top in ("nncanon", "generator")
                for p in (REPO / top).rglob("__init__.py")}
    assert set(named) >= expected, f"folders the map does not describe: {sorted(expected - set(named))}"
    wrong = []
    # nncanon/families/ is one module per family, mapped as a whole
    for folder in sorted(expected - {"nncanon/families/"}):
        on_disk = {p.name for p in (REPO / folder).glob("*.py")} - {"__init__.py"}
        listed = named[folder] - {"__init__.py"}
        wrong += [f"{folder}{m} is not in the map" for m in sorted(on_disk - listed)]
        wrong += [f"the map names {folder}{m}, which does not exist" for m in sorted(listed - on_disk)]
    assert not wrong, "\n".join(wrong)


def test_no_stage_looks_a_family_up_by_name():
    """A family is resolved once per command, by the entry points (the command line, the whole build, ``new`` and
    ``claims``), and handed down as a `Family`: no stage below them calls ``get_family`` again. A stage module's
    ``main`` is a process of its own, handed names on its command line, so it resolves them there."""
    wrong = []
    for name, path in sorted(modules("generator").items()):
        if name in ORCHESTRATORS or _stage(name) == "recipe":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mains = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "main"
                 for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and id(node) not in mains:
                called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if called == "get_family":
                    wrong.append(f"{path.relative_to(REPO)}:{node.lineno} calls get_family: take the Family its "
                                 "caller resolved")
    assert not wrong, "\n".join(wrong)
