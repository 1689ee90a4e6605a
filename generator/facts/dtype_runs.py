"""The half-dtype verification (generator/facts/dtypes.py) as a build stage of its own, beside the facts: ``make
site`` (``generator build``) runs it on every family, ``generator verify`` only when asked (``--dtypes``), so the
suite's prelude does not pay its loads.

It needs the float32 facts first (which relations the float32 loads held: each is checked again at each dtype), and
keeps its result per family in ``<build>/dtypes/<family>.json``, ``{"key": ..., "dtypes": ..., "dtype_edits": ...}``,
under a key of the family's facts key and this stage's code (:func:`run_key`), so a rerun with nothing changed runs
nothing. The family page (generator/site/render.py) shows a kept result only while its key is current.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from generator.recipe.family import Family

HERE = Path(__file__).parent
#: the code whose change changes a result without changing the facts key (kept in the key all the same: the facts key
#: covers generator/facts/ today, this keeps the stage's key right if that ever narrows)
CODE = (HERE / "dtypes.py", HERE / "dtype_runs.py", HERE / "op_graph.py")
DIRECTORY = "dtypes"


def dtypes_dir(build: Path | None = None) -> Path:
    from generator.facts.collect import build_dir

    return (build or build_dir()) / DIRECTORY


def run_key(facts_key: str) -> str:
    """The family's facts key and the stage's code: what a result depends on."""
    digest = hashlib.sha256(facts_key.encode())
    for path in CODE:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def kept(directory: Path, family: str, facts_key: str) -> dict | None:
    """The kept result of ``family`` when it is current for ``facts_key``, else None (absent, stale, cut short)."""
    path = directory / f"{family}.json"
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or cut short: the cache only saves time
        return None
    return result if result.get("key") == run_key(facts_key) else None


def verify_family(family: Family, relations: list[dict], progress: Callable[[str], None] = print) -> dict:
    """``{"dtypes": ..., "dtype_edits": ...}`` of one family: its tiny checkpoint loaded as the facts' collect loads
    it, each dtype checked against the float32 ``relations``."""
    import torch
    from transformers.utils import logging as hf_logging

    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts import source_lines
    from generator.facts.collect import PROMPTS
    from generator.facts.dtypes import verify_dtypes
    from generator.facts.identity import import_module
    from generator.facts.loads import resolve_loads

    hf_logging.disable_progress_bar()
    family_module = import_module(family)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's ops are too small to share among threads
    source_lines.forget_compiled()  # nnsight's memo of another family's forward, as collect forgets it
    models = resolve_loads(family, family_module, checkpoint_dir(family))
    try:
        progress(f"{family.family}: every relation and edit in bfloat16 and float16")
        return verify_dtypes(family, family_module, models, list(PROMPTS), relations)
    finally:
        models.close()
        torch.set_num_threads(threads)


def cached_dtypes(family: Family, progress: Callable[[str], None] = print, force: bool = False,
                  build: Path | None = None) -> tuple[dict, bool]:
    """The family's half-dtype result, run only when :func:`run_key` of its facts key changed; (result, ran). The
    facts must be current (``generator verify`` first): the stage reads their relations."""
    from generator.facts.collect import cache_key, facts_dir

    facts_path = (build / "facts" if build else facts_dir()) / f"{family.family}.json"
    key_path = facts_path.with_suffix(".key")
    facts_key = cache_key(family)
    if not facts_path.exists() or not key_path.exists() or key_path.read_text().strip() != facts_key:
        raise FileNotFoundError(f"{facts_path}: no current facts of {family.family} to verify the dtypes against; run "
                                f"python -m generator verify {family.family} first")
    directory = dtypes_dir(build)
    if not force and (result := kept(directory, family.family, facts_key)) is not None:
        return result, False
    facts = json.loads(facts_path.read_text(encoding="utf-8"))
    result = {"key": run_key(facts_key), **verify_family(family, facts["relations"], progress)}
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{family.family}.json.{os.getpid()}.tmp"  # its own: another process may write the same
    tmp.write_text(json.dumps(result, sort_keys=True, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(directory / f"{family.family}.json")
    return result, True


def merged(facts: dict, directory: Path, facts_key: str | None) -> dict:
    """``facts`` with the family's current dtype result in them (``dtypes``, ``dtype_edits``), as the page renders
    them; unchanged where none is kept or it is stale."""
    result = kept(directory, facts["family"], facts_key) if facts_key else None
    if result is not None:
        facts.update(dtypes=result["dtypes"], dtype_edits=result["dtype_edits"])
    return facts
