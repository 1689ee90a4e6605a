"""TransformerLens names: the TransformerLens hook each standard value corresponds to, checked.

``nncanon.guards.other_names.TRANSFORMER_LENS`` (nncanon's errors use it too; imported where used: importing nncanon
loads torch, which the renderer, importing this module, must not) says which TransformerLens 4.3 hook (``TransformerBridge``, which runs the Hugging
Face module itself) holds the same tensor as a standard value. It is a claim, and :func:`check`
tests it on a family's tiny checkpoint: the values read through nncanon on block 1 and the root,
the hooks read through ``TransformerBridge.run_with_cache``, on the same prompt, under eager
attention (the bridge forces it). Each mapped value gets ``{"hook", "agreed", "error"}`` (the hook read on block 1, or the first block with the value's host);
``agreed`` is None where TransformerLens is not installed (an optional extra:
``pip install nncanon[transformer-lens]``) or does not bridge the family.

The check runs in one subprocess for every family (``python -m generator.facts.tl_names <family>...``),
nncanon's reads of every family first, then every bridge: booting a bridge patches transformers'
attention functions for the whole process, so nncanon's reads after it would read another forward. The
build caches each family's result (:func:`annotations`) and the page shows it on the value's row; the facts
(collected under any CPU capability) do not carry it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from generator.disk import SHARED, room
from generator.recipe.family import Family

BLOCK = 1
PROMPT = "The cat sat on the mat"
#: the same tensor up to its last step summed in another order (the bridge reads gpt2's Conv1D through its
#: own matmul: ~1e-6; llama's: 0): one step of the float32 error model, nncanon.precision.STEP, written out
#: here because the renderer imports this module and must not import torch (tests/test_precision.py checks it)
ATOL = RTOL = 1e-5


def installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("transformer_lens") is not None


def _key(host: str, name: str) -> str:
    """How the results are keyed in the JSON the site reads (generator/site/render.py's ``annotate``)."""
    return f"{host}::{name}"


def _ours(family: Family) -> dict:
    """nncanon's reads of the mapped values on the tiny checkpoint, and what the bridge needs to read its own."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.guards.other_names import TRANSFORMER_LENS as NAMES

    directory = checkpoint_dir(family)
    model = nncanon.load(directory, attn_implementation="eager")
    served = {(row.host, row.name) for row in model.support() if row.available}
    mapped = {key: hook for key, hook in NAMES.items() if key in served}
    names = [name if host == "model" else f"{host[len('model.layers[i]'):].lstrip('.')}.{name}".lstrip(".")
             for host, name in mapped]
    # each value on block 1 if its host serves it there, else on the first block that does (a hybrid stack's
    # attention is not on block 1; deepseek_v3's block 0 is dense, the rest a mixture)
    serving: dict[tuple[str, str], list[int]] = {}
    for row in model.support():
        if row.available and row.blocks:
            serving.setdefault((row.host, row.name), []).extend(row.blocks)
    block = {key: None if key[0] == "model" else BLOCK if BLOCK in serving[key] else min(serving[key])
             for key in mapped}
    if hasattr(model.family_module, "speech_inputs"):  # no text call: what the bridge makes of it is all there is to say
        return {"directory": directory, "tokenizer": model.tokenizer, "ids": None, "mapped": mapped, "block": block,
                "ours": {}}
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    ours = _stacks(model, [key for key in mapped if key[0].startswith("model.")
                           and not key[0].startswith("model.layers[i]")], block, ids)
    for at in sorted({b for b in block.values() if b is not None}) or [0]:  # a cache reads its names on its blocks
        wanted = [(key, short) for key, short in zip(mapped, names) if block[key] in (at, None) and key not in ours]
        cache = model.cache([short for _, short in wanted], ids, blocks=[at])
        for key, short in wanted:
            ours[key] = cache[short if key[0] == "model" else f"layers.{at}.{short}"]
    return {"directory": directory, "tokenizer": model.tokenizer, "ids": ids, "mapped": mapped, "block": block,
            "ours": ours}


def _stacks(model: Any, keys: list, block: dict, ids: Any) -> dict:
    """The values on an encoder-decoder's stacks (``model.encoder.layers[i]``), which ``model.cache`` (one stack of
    ``layers``) does not name: one forward, one invoke per read, so the reads need no order among them."""
    import torch

    ours: dict = {}
    if not keys:
        return ours
    with torch.no_grad(), model.trace() as tracer:
        with tracer.invoke(ids):
            pass
        for host, name in keys:
            path = host[len("model."):].replace("[i]", f".{block[(host, name)]}")
            with tracer.invoke():
                ours[(host, name)] = getattr(model.get(path), name).save()
    return ours


def _theirs(family: str, read: dict) -> dict[str, dict]:
    """The bridge's hooks against nncanon's reads: ``"host::value"`` -> ``{"hook", "agreed", "error"}``."""
    import torch

    directory, mapped, block, ours, ids = (read[k] for k in ("directory", "mapped", "block", "ours", "ids"))
    from transformer_lens.model_bridge import TransformerBridge

    try:
        bridge = TransformerBridge.boot_transformers(str(directory), tokenizer=read["tokenizer"], device="cpu")
    except Exception as error:  # noqa: BLE001 - any refusal: the family is not bridged
        why = f"TransformerLens does not bridge {family}: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
        return {_key(*key): {"hook": hook.replace("|", " or "), "agreed": None, "why": why}
                for key, (hook, _) in mapped.items()}
    if ids is None:  # booted on a speech family: this check reads on a text prompt only
        why = f"TransformerLens boots {family}, but this check reads on a text prompt and {family} takes audio features"
        return {_key(*key): {"hook": hook.replace("|", " or "), "agreed": None, "why": why}
                for key, (hook, _) in mapped.items()}
    try:
        with torch.no_grad():
            logits, theirs = bridge.run_with_cache(ids)
    except Exception as error:  # noqa: BLE001 - booted but cannot run it (OPT-350m's post-norm block): not bridged
        why = (f"TransformerLens does not bridge {family}: its forward fails: {type(error).__name__}: "
               f"{str(error).splitlines()[0][:200]}")
        return {_key(*key): {"hook": hook.replace("|", " or "), "agreed": None, "why": why}
                for key, (hook, _) in mapped.items()}
    found = {}
    for (host, name), (hook, layout) in mapped.items():
        candidates = [h.format(i=block[(host, name)]) for h in hook.split("|")]
        hook_name = next((h for h in candidates if h in theirs), candidates[0])
        hook = hook_name.replace(f"blocks.{block[(host, name)]}.", "blocks.{i}.")
        value = ours[(host, name)]
        tensor = logits if hook == "logits" else theirs[hook_name] if hook_name in theirs else None
        if tensor is not None and layout == "seq-first":
            tensor = tensor.transpose(1, 2)
        if tensor is None or tuple(tensor.shape) != tuple(value.shape):
            shape = None if tensor is None else list(tensor.shape)
            found[_key(host, name)] = {"hook": hook, "agreed": False, "error": None,
                                       "why": f"the bridge's {hook_name} is {shape}, the value {list(value.shape)}"}
            continue
        # the facts hold no CPU-dependent digits: "0" (the same tensor) or the tolerance it agreed within
        exact = bool(torch.equal(tensor.float(), value.float()))
        agreed = bool(torch.allclose(tensor.float(), value.float(), atol=ATOL, rtol=RTOL))
        found[_key(host, name)] = {"hook": hook, "agreed": agreed, "error": "0" if exact else f"≤ {ATOL:g}" if agreed else None}
    return found


def check(families: list[str]) -> dict[str, dict[str, dict]]:
    """family -> ``"host::value"`` -> ``{"hook", "agreed", "error"}`` for every mapped value it serves; agreed None
    (with ``why``) where TransformerLens is not installed or does not bridge the family. One process for all:
    every family's nncanon reads first, then every bridge (a bridge patches transformers for the process)."""
    from nncanon.guards.other_names import TRANSFORMER_LENS as NAMES

    if not installed():
        return {family: {_key(*key): {"hook": hook.replace("|", " or "), "agreed": None,
                                      "why": "TransformerLens is not installed"} for key, (hook, _) in NAMES.items()}
                for family in families}
    if not families:
        return {}
    run = subprocess.run([sys.executable, "-m", "generator.facts.tl_names", *families], capture_output=True,
                         text=True, timeout=3 * 60 * 60)  # stops a hung bridge only, far above every family at 8x load
    if run.returncode != 0:
        raise RuntimeError(f"the TransformerLens check failed: {run.stderr.strip().splitlines()[-1:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def annotations(families: list[Family], directory: Path, progress: Any = print) -> dict[str, dict[str, dict]] | None:
    """Each family's TransformerLens agreement for the page (None without the extra), cached per family in
    ``directory`` under its facts' cache key and the TransformerLens version: a build checks only what changed.

    The results are shared by every build directory on the machine (``$NNCANON_CACHE/transformer_lens``, as the
    survey's rows): a result is a function of its key alone (the family's fact sources and the releases, this
    module's code, the CPU capability asked for), so a build in a new directory (every test's) copies it instead
    of booting the bridge again (~20 CPU-s for a large family)."""
    if not installed():
        return None
    from generator.checkpoint.checkpoints import cache_root

    directories = (directory, cache_root() / "transformer_lens")
    for place in directories:
        place.mkdir(parents=True, exist_ok=True)
    keys = {family.family: _key_of(family) for family in families}
    families = list(keys)
    found, stale = _found(families, keys, directories)
    if stale:
        from generator.shared_rows import computing

        with computing(directories[1]):  # another process checking the same families: wait, then read its results
            more, stale = _found(stale, keys, directories)
            found.update(more)
            if stale:
                progress(f"TransformerLens names: {', '.join(stale)}")
                for family, result in check(stale).items():
                    for place in directories:
                        _write(place / f"{family}.json", {"key": keys[family], "found": result})
                    found[family] = result
    return {family: found[family] for family in families}


def kept(families: list[Family], directory: Path) -> dict[str, dict[str, dict]] | None:
    """The results ``directory`` keeps under each family's current key, checking none (None without the extra): a
    family with none kept is left out, and its page shows no TransformerLens column."""
    if not installed():
        return None
    keys = {family.family: _key_of(family) for family in families}
    return _found(list(keys), keys, (directory,))[0]


def _found(families: list[str], keys: dict[str, str], directories: tuple[Path, ...]) -> tuple[dict, list[str]]:
    """The results saved under their keys in the first of ``directories`` that holds them (copied into the first,
    the build directory's, from the shared one), and the rest."""
    found, stale = {}, []
    for family in families:
        for place in directories:
            saved = _saved(place / f"{family}.json")
            if saved.get("key") == keys[family]:
                found[family] = saved["found"]
                if place is not directories[0]:
                    _write(directories[0] / f"{family}.json", saved)
                break
        else:
            stale.append(family)
    return found, stale


def _key_of(family: Family) -> str:
    """The family's facts' cache key, the TransformerLens release, this module's code and the CPU capability."""
    import hashlib
    import os
    from importlib.metadata import version

    from generator.facts.collect import cache_key

    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]
    # a variant's ("opt.350m") sources are its family's YAML, which holds its recipe, and the library
    return (f"{cache_key(family)}-{version('transformer-lens')}-{code}-"
            f"{os.environ.get('ATEN_CPU_CAPABILITY', '')}")


def _saved(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, or cut short by a killed build: the cache only saves time
        return {}


def _write(path: Path, data: dict) -> None:
    """Written whole or not at all: another build may read the shared file at the same time."""
    import os

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with room(path.parent, SHARED):
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        tmp.replace(path)


def main(argv: list[str]) -> None:
    import os
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore")
    from generator.recipe.family import get_family

    # a process of its own, handed names: the one place this stage looks a family (or a variant, "opt.350m") up
    families = {}
    for name in argv:
        base, _, variant = name.partition(".")
        families[name] = get_family(base).variant(variant) if variant else get_family(base)
    reads = {name: _ours(family) for name, family in families.items()}  # every nncanon read before any bridge boots
    print(json.dumps({family: _theirs(family, reads[family]) for family in argv}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
