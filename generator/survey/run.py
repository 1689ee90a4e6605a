"""``python -m generator survey``: every causal-LM, image-text-to-text, masked-LM, seq2seq, speech-to-text and CTC
model type, surveyed and cached.

The model types are transformers' own lists (``KINDS``: ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` ...
``MODEL_FOR_CTC_MAPPING_NAMES``), so a release that adds one adds a row. A type on a decoder list is surveyed on the
decoder parts (``measure``), one on the encoder lists alone on its kind's encoder parts (``encoders``). Each type's facts
are cached as ``<build>/survey/<model_type>.json`` under a key of the transformers, torch and nnsight
releases, the survey code's hash and the model type, and shared with every build directory on the machine
(``$NNCANON_CACHE/survey``, beside the tiny checkpoints): a rerun with nothing changed reads them back and
runs nothing (but a row that failed on what the key cannot see, a package not installed or the time budget on
a loaded machine, is surveyed again: ``measure.OUTSIDE_THE_KEY``), and the site's build runs the survey before it renders (`survey_all`); ``build --force``
collects the families again, not the survey (``survey --force`` does). The comparison columns are no
measurement and are not cached: each whole survey writes them into ``index.json`` for every model type,
TransformerLens's bridge from the installed package's own list of architectures, nnterp's status from the
data file this package carries (``nnterp_status.json``, which names its source and date).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from generator.disk import SHARED, room
from generator.survey.kinds import KINDS, kinds_of, mapping, surveyed_as

SCHEMA = 2  # 2: a row says where the chain of relations breaks ("chain")
HERE = Path(__file__).resolve().parent
NNTERP = HERE / "nnterp_status.json"
#: the list of model types the last whole survey covered (``index.json`` beside the rows)
INDEX = "index.json"


class UnknownModelType(ValueError):
    """A model type the survey was asked for that transformers does not ship on one of ``KINDS``' lists."""


def survey_dir() -> Path:
    from generator.facts.collect import build_dir

    return build_dir() / "survey"


def shared_dir() -> Path:
    """The rows every build directory on this machine shares, beside the tiny checkpoints (``$NNCANON_CACHE``):
    a row is a function of its key alone, so a build in a new directory (every test's) copies it, not runs it."""
    from generator.checkpoint.checkpoints import cache_root

    return cache_root() / "survey"


def model_types() -> list[str]:
    """Every model type on one of ``KINDS``' lists in the installed transformers, sorted."""
    return sorted(set().union(*(mapping(kind) for kind, _ in KINDS)))


def _release(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "(not installed)"


def code_hash() -> str:
    """The survey's code and what it measures with: its own package, the relations' reader, the weights'
    draws, the generic hosts and their relations. A change to any of them surveys every type again."""
    import generator.checkpoint.tiny_weights
    import generator.facts.chain
    import generator.facts.dataflow
    import generator.facts.norm_placement
    import generator.facts.proof
    import nncanon.core.relations
    import nncanon.guards.order
    import nncanon.parts.attention.cross_attention
    import nncanon.parts.attention.softmax
    import nncanon.parts.blocks.decoder
    import nncanon.parts.blocks.mlp
    import nncanon.parts.encoders.bidirectional
    import nncanon.parts.encoders.embeddings
    import nncanon.parts.encoders.post_norm
    import nncanon.parts.encoders.seq2seq
    import nncanon.parts.encoders.speech
    import nncanon.parts.weights

    files = sorted(HERE.glob("*.py")) + [Path(m.__file__) for m in (
        generator.facts.proof, generator.checkpoint.tiny_weights, nncanon.parts.blocks.decoder, nncanon.parts.attention.softmax,
        nncanon.parts.blocks.mlp, nncanon.core.relations, generator.facts.chain, generator.facts.dataflow,
        nncanon.guards.order, nncanon.parts.weights, generator.facts.norm_placement,
        nncanon.parts.attention.cross_attention, nncanon.parts.encoders.bidirectional, nncanon.parts.encoders.embeddings,
        nncanon.parts.encoders.post_norm, nncanon.parts.encoders.seq2seq, nncanon.parts.encoders.speech)]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(model_type: str, code: str) -> str:
    # torch and nnsight build, run and wrap each type as much as transformers does: an upgrade must survey again
    payload = {"transformers": _release("transformers"), "torch": _release("torch"), "nnsight": _release("nnsight"),
               "code": code, "model_type": model_type, "schema": SCHEMA}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def transformer_lens_bridged() -> tuple[set[str], dict[str, int]]:
    """The architecture classes TransformerLens's bridge adapts (its SUPPORTED_ARCHITECTURES), and how many
    checkpoints of each its registry marks verified (status 1 in its supported_models.json)."""
    try:
        from transformer_lens.factories.architecture_adapter_factory import SUPPORTED_ARCHITECTURES
        from transformer_lens.tools.model_registry import registry_io
    except ImportError:
        return set(), {}
    registry = Path(registry_io.__file__).parent / "data" / "supported_models.json"
    verified: dict[str, int] = {}
    if registry.is_file():
        for entry in json.loads(registry.read_text(encoding="utf-8")).get("models", []):
            if entry.get("status") == 1:
                verified[entry["architecture_id"]] = verified.get(entry["architecture_id"], 0) + 1
    return set(SUPPORTED_ARCHITECTURES), verified


def comparison(cls: str | None, bridged: set[str], verified: dict[str, int], nnterp: dict) -> dict:
    tl = None
    if cls in bridged:
        count = verified.get(cls, 0)
        tl = f"bridged; {count} checkpoint{'s' * (count != 1)} pass its checks" if count else "bridged"
    return {"transformer_lens": tl, "nnterp": nnterp["classes"].get(cls)}


def _write(path: Path, data: dict) -> None:
    with room(path.parent, SHARED):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(path)


def cached(model_type: str, key: str) -> dict | None:
    """The row under ``key``: the build directory's, else the shared one's (copied into the build directory)."""
    for directory in (survey_dir(), shared_dir()):
        try:
            data = json.loads((directory / f"{model_type}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("key") == key and not data.get("retry"):
            if directory != survey_dir():
                _write(survey_dir() / f"{model_type}.json", data)
            return data["facts"]
    return None


def survey_all(names: list[str] | None = None, progress: Callable[[str], None] = print,
               force: bool = False, jobs: int = 1) -> dict:
    """Survey ``names`` (default: every model type), each only where its cache key changed, in ``jobs``
    processes; returns the run's numbers (how many built, ran, wrapped; the mean values resolved; wall and CPU
    seconds, the caller's own)."""
    every = model_types()
    unknown = [name for name in names or [] if name not in every]
    if unknown:
        raise UnknownModelType(f"{unknown[0]!r} is on none of transformers {_release('transformers')}'s lists of "
                               f"{', '.join(kind for kind, _ in KINDS)} model types; {len(every)} are, e.g. "
                               f"{', '.join(every[:3])}")
    names = names or every
    start, cpu = time.perf_counter(), time.process_time()
    code = code_hash()
    surveyed = 0
    keys = {model_type: cache_key(model_type, code) for model_type in names}
    done = {} if force else {t: cached(t, keys[t]) for t in names}
    if force or None in done.values():
        from generator.shared_rows import computing

        with computing(shared_dir()):  # another process surveying the same rows: wait for it, then read them
            done = {} if force else {t: cached(t, keys[t]) for t in names}
            todo = [model_type for model_type in names if done.get(model_type) is None]
            if jobs > 1 and len(todo) > 1:
                done.update(_survey_in_parallel(todo, keys, jobs, progress))
            for model_type in todo:
                if done.get(model_type) is None:
                    done[model_type] = _survey_one(model_type, keys[model_type], progress)
            surveyed = len(todo)
    rows = [done[model_type] for model_type in names]
    numbers = totals(rows)
    if names == every:  # the page lists the types of the last whole survey, not a stale file of an older release
        write_index(every)
    numbers.update(surveyed=surveyed, wall_s=round(time.perf_counter() - start, 1),
                   cpu_s=round(time.process_time() - cpu, 1))
    progress(f"survey: {numbers['types']} model types, {numbers['builds']} build, {numbers['forwards']} run, "
             f"{numbers['wraps']} wrap; {numbers['mean_values']} of {numbers['values_of']} values resolve on "
             f"average; {surveyed} surveyed now in {numbers['wall_s']} s ({numbers['cpu_s']} CPU-s)")
    return numbers


def _print(line: str) -> None:
    print(line, flush=True)


def _survey_in_parallel(todo: list[str], keys: dict[str, str], jobs: int,
                        progress: Callable[[str], None]) -> dict[str, dict]:
    """Each type of ``todo`` surveyed by one of ``jobs`` fresh interpreters (spawn: torch is not fork-safe once
    imported), the next type to the first one free; each writes its row as a sequential survey does."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    progress(f"survey: {len(todo)} model types in {min(jobs, len(todo))} processes")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=context) as pool:
        rows = pool.map(_survey_one, todo, [keys[t] for t in todo], [_print] * len(todo))
        return dict(zip(todo, rows, strict=True))


def _survey_one(model_type: str, key: str, progress: Callable[[str], None]) -> dict:
    from generator.survey import encoders, measure

    began = time.perf_counter()
    kind = surveyed_as(model_type)
    facts = measure.survey(model_type) if kind == "decoder" else \
        encoders.survey(model_type, kind, getattr(__import__("transformers"), mapping(kind)[model_type]))
    # a failure the key cannot see (measure.OUTSIDE_THE_KEY) is the page's row for now, never a cache hit
    retry = {"retry": True} if facts.pop("retry", False) else {}
    for directory in (survey_dir(), shared_dir()):
        _write(directory / f"{model_type}.json", {"key": key, "facts": facts, **retry})
    progress(f"survey {model_type}: {summary(facts)} ({time.perf_counter() - began:.1f} s)")
    return facts


def write_index(names: list[str]) -> dict:
    """``index.json``: the model types of a whole survey, the ones with a family page, and the comparison
    columns of each (TransformerLens, nnterp), with the nnterp file's source."""
    nnterp = json.loads(NNTERP.read_text(encoding="utf-8"))
    bridged = transformer_lens_bridged()
    classes = {name: cls for kind, _ in reversed(KINDS) for name, cls in mapping(kind).items()}
    index = {"schema": SCHEMA, "transformers": _release("transformers"),
             "transformer_lens": _release("transformer-lens"), "model_types": names, "pages": pages(),
             "comparison": {name: comparison(classes.get(name), *bridged, nnterp) for name in names},
             "tasks": {name: kinds_of(name) for name in names},
             "nnterp": {k: v for k, v in nnterp.items() if k != "classes"}}
    _write(survey_dir() / INDEX, index)
    return index


def pages() -> dict[str, str]:
    """model type -> the family whose page serves it (every family with a families/*.yaml)."""
    from generator.recipe.family import all_families
    from nncanon.families import model_types_of

    return {model_type: family.family for family in all_families()
            for model_type in model_types_of(family.module.rsplit(".", 1)[-1])}


def summary(facts: dict) -> str:
    if facts["failure"]:
        return facts["failure"]
    values, relations = facts["values"], facts["relations"]
    chain = f"; the chain breaks: {facts['chain']}" if facts.get("chain") else ""
    return (f"{sum(v is None for v in values.values())} of {len(values)} values, "
            f"{sum(r is None for r in relations.values())} of {len(relations)} relations{chain}")


def totals(rows: list[dict]) -> dict:
    wrapped = [r for r in rows if r["wraps"]]
    resolved = [sum(v is None for v in r["values"].values()) for r in wrapped]
    return {"types": len(rows), "builds": sum(r["builds"] for r in rows), "forwards": sum(r["forwards"] for r in rows),
            "wraps": len(wrapped), "values_of": max((len(r["values"]) for r in wrapped), default=0),
            "mean_values": round(sum(resolved) / len(resolved), 1) if resolved else 0}


def load_rows(directory: Path | None = None) -> tuple[dict, list[dict]]:
    """The last whole survey's index and its rows (the renderer's input; no torch); ``({}, [])`` when no
    whole survey has run in ``directory``."""
    directory = survey_dir() if directory is None else Path(directory)
    try:
        index = json.loads((directory / INDEX).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, []
    rows = [json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))["facts"]
            for name in index["model_types"]]
    return index, rows
