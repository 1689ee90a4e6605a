"""Collect: run nncanon on a family's tiny checkpoint and write down what holds -> facts JSON.

Facts are the only interface between running models and rendering (see ARCHITECTURE.md).
Every value row is read off the family module's declarations and measured on the tiny
checkpoint under each load condition the page talks about; every claim the family YAML makes
(a value's layout and "read at", an identity, a diagram part) is checked against the code and
the measurement, and a claim that does not hold raises `ClaimError` naming it. Full-size
numbers (printout, config tables) come from the recorded configs built on the meta device.

Facts are deterministic: sorted keys, no timestamps, floats rounded where they are errors.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from generator.disk import BUILD, room
from generator.facts import source_lines
from generator.facts.chain import check_family_chain
from generator.facts.claim_error import ClaimError
from generator.facts.claims import block_of_kind, check_identities, check_value_claims
from generator.facts.configs import config_tables, full_size
from generator.facts.dataflow import dataflow
from generator.facts.hidden_states import hidden_states_map
from generator.facts.host_dims import host_dims
from generator.facts.identity import check_identity, check_markers, import_module
from generator.facts.loads import Models, resolve_loads
from generator.facts.measure import full_size_notes, host_rows, run_inputs
from generator.facts.tags import checkpoint_settings
from generator.facts.traits import check_tags, traits, vision_norm
from generator.kernel_log import KernelLog, write_kernels
from generator.notes.notes_parse import parse_sources
from generator.recipe.family import Family
from generator.recipe.fields import REPO_ROOT

__all__ = ["ClaimError", "collect", "cached_facts", "is_current", "cache_key", "build_dir", "facts_dir", "parts", "PROMPTS",
           "KERNEL_FREE"]

SCHEMA = 1

#: the facts no CPU kernel can change, left out of a kernels-only collect (``verify --kernels-only``: what the
#: portability check compares across CPUs, tests/test_portable_facts.py). The config tables are read off models on
#: the meta device, which carry shapes and run no arithmetic. An edit's fact holds no number (which value, under which
#: load, reaching which call: whether it reads None decides that), and its two checks compare forwards of one process,
#: run by the same kernels on both sides. Everything else (values, relations, identities, variants, notes) is measured
#: on the tiny model and stays in.
KERNEL_FREE = ("edits", "configs", "vision_configs", "sizes")
#: where a kernels-only collect writes, apart from the facts a site is rendered from
KERNEL_FACTS = "facts-kernels"

# -- the page's structure ---------------------------------------------------------------------------


def _worst(errors: dict[str, str]) -> str | None:
    """The largest of a relation's errors over loads ("0" or "≤ tolerance")."""
    return max(errors.values(), key=lambda e: e != "0", default=None)


def on_block(relations: list[dict], block: str, index: int) -> list[dict]:
    """The relations checked on block ``index`` of ``block`` (``model.layers[i]``) and its sublayers."""
    return [r for r in relations if r["host"].startswith(block) and index in r["blocks"]]


def flow(adds: list[list[str]]) -> list[list[str]]:
    """Residual adds in the order the stream flows: each add's input is the previous one's output."""
    ordered, rest = [], list(adds)
    outputs = {add[2] for add in adds}
    stream = next((add[0] for add in adds if add[0] not in outputs), None)
    while rest:
        step = next((add for add in rest if add[0] == stream), rest[0])
        ordered.append(step)
        rest.remove(step)
        stream = step[2]
    return ordered


def stack(family: Family, family_module: Any, printout_model: Any, models: Models, identities: list[dict],
          relations: list[dict]) -> dict:
    page = family.get("page") or {}
    kinds = page.get("block_kinds") or {}
    blocks = family_module.layer_types(printout_model)
    tiny = models.get(models.default)
    block_kinds = []
    for kind, spec in kinds.items():
        if kind not in blocks:
            raise ClaimError(family.family, f"page.block_kinds.{kind}", f"no block of kind {kind!r} on "
                                                                         f"{family.printout_checkpoint}")
        identity = next((i for i in identities if i["kind"] == kind), None)
        block = block_of_kind(tiny, family_module, kind)
        index = int(block.rsplit(".", 1)[-1])
        standard = re.sub(r"layers\.\d+$", "layers[i]", block)  # layers[i], or a stack's: encoder.layers[i]
        try:  # the mixer is printed on the page and the index's facets: it must be a module of the block
            tiny.get(f"{block}.{spec['mixer']}")
        except AttributeError:
            raise ClaimError(family.family, f"page.block_kinds.{kind}.mixer", f"{spec['mixer']!r} is not a module of "
                                                                                f"{block}; name its mixer, e.g. self_attn") from None
        # the residual adds the diagram draws: the block relations that state one, on a block of this kind
        mine = on_block(relations, f"model.{standard}", index)
        adds = flow([r["adds"] for r in mine if r["host"] == f"model.{standard}" and r["adds"]])
        block_kinds.append({
            "kind": kind, "label": spec["label"], "mixer": spec["mixer"], "adds": adds,
            "relations": [{"text": r["text"], "host": r["host"], "error": _worst(r["errors"])}
                          for r in mine],
            "identity": identity["expr"] if identity else None,
            "identity_error": identity["error"] if identity else None,
            "parts": parts(family, tiny, block, standard, spec.get("parts", []), f"page.block_kinds.{kind}"),
            **produced(models, index, family_module, f"model.{standard}"),
        })
    return {
        "checkpoint": family.printout_checkpoint, "num_layers": len(blocks),
        "chain": [{"module": "embed_tokens", "value": "token_embeddings"},
                  {"module": "layers", "count": len(blocks)},
                  {"module": "norm", "value": "final_norm_output"},
                  {"module": "lm_head", "value": "lm_head_output"},
                  {"module": "logits", "value": "the output"}],
        "blocks": blocks, "block_kinds": block_kinds, "marked": marked_blocks(family_module, printout_model),
    }


def marked_blocks(family_module: Any, full: Any) -> list[dict]:
    """Full-size blocks a family serves more on: qwen3_vl's first blocks, which add the DeepStack features
    (``deepstack_output``): the slider marks them. A family module's own ``marked_blocks(full)`` says which blocks
    it marks instead (paligemma's: the blocks whose mask lets the prefix attend both ways)."""
    from nncanon.parts.vision.qwen_vit import DeepStackBlock, deepstack_blocks

    if hasattr(family_module, "marked_blocks"):
        return family_module.marked_blocks(full)

    if DeepStackBlock not in getattr(family_module, "ENVOYS", {}).values():
        return []
    return [{"label": "DeepStack", "value": "model.layers[i].deepstack_output",
             "blocks": list(range(deepstack_blocks(full)))}]


def produced(models: Models, index: int, family_module: Any = None, standard: str = "model.layers[i]") -> dict:
    """The order one forward produces every value of block ``index``'s hosts in (``host.name``), under the
    load that produces the most of them, and which of them feed which (``generator/facts/dataflow.py``): the
    diagram draws both and the build checks its arrows against the order."""
    from nncanon.guards.order import block_sequence

    best: tuple[list, str, Any] = ([], "", None)
    for load in models.all:
        model = models.get(load.label)
        if load.task != "text-generation":
            continue  # the multimodal load's forward order of the text blocks is the text load's
        with load.within(model):
            sequence = block_sequence(model, index) or []
        if len(sequence) > len(best[0]):
            best = (sequence, load.label, model)
    if not best[0] and family_module is not None:
        # a block a text prompt never runs (mllama's cross-attention blocks): measured on a call with images
        from nncanon.guards.order import called_block_sequence

        for load in models.all:
            if load.task == "text-generation":
                continue
            model = models.get(load.label)
            with load.within(model):
                args, kwargs = run_inputs(model, family_module, PROMPTS)
                sequence = called_block_sequence(model, index, args, kwargs)
            if len(sequence) > len(best[0]):
                best = (sequence, load.label, model)
    # an encoder-decoder's blocks at one index are measured in one forward: this stack's (``standard``) alone
    rows = [f"{host}.{name}" for host, name in best[0] if host.startswith(standard)]
    edges = dataflow(best[2], standard.replace("[i]", f"[{index}]"), rows) if best[2] is not None else []
    return {"sequence": rows, "sequence_load": best[1], "dataflow": edges}


def transformers_hidden_states(models: Models, family_module: Any, prompts: list[str]) -> dict:
    """What each entry of transformers' ``output_hidden_states`` is, in standard names, on the default load."""
    load, model = models.loads[models.default], models.get(models.default)
    with load.within(model):
        return hidden_states_map(model, *run_inputs(model, family_module, prompts))


def vision_produced(models: Models, family_module: Any) -> dict:
    """The vision block's sequence and dataflow, as :func:`produced`, measured on the image load's prompt
    with images (a text prompt never runs the encoder)."""
    from nncanon.guards.order import vision_block_sequence

    load = models.loads["image"]
    model = models.get("image")
    with load.within(model):
        args, kwargs = run_inputs(model, family_module, PROMPTS)
        rows = [f"{host}.{name}" for host, name in vision_block_sequence(model, args, kwargs)]
    return {"sequence": rows, "sequence_load": "image", "dataflow": dataflow(model, "model.vision.layers[0]", rows)}


def parts(family: Family, model: Any, block: str, standard: str, declared: list, field: str) -> list[dict]:
    """Diagram parts: each names a module under the block and the value drawn at it; both must exist.

    ``value`` is a value name of the block's host, or ``child.value`` for a value of a child host; a third
    element ``parallel`` draws the part beside the one before it, reading the same input (falcon_h1's mixers).
    """
    out = []
    for n, (part, value, *parallel) in enumerate(declared):
        where = f"{field}.parts[{n}]"
        child, _, name = value.rpartition(".")
        try:
            model.get(f"{block}.{part}")
            host = model.get(f"{block}.{child}") if child else model.get(block)
        except AttributeError as error:
            raise ClaimError(family.family, where, f"{standard}.{part} or its value {value!r} does not "
                                                  f"resolve: {error}") from None
        if name not in {v.name for v in type(host).values()}:
            raise ClaimError(family.family, where, f"{value!r} is not a value of {standard}")
        host_std = f"model.{standard}" + (f".{child}" if child else "")
        out.append({"id": f"{standard}.{part}", "label": part.rsplit(".", 1)[-1], "value": name, "host": host_std,
                    **({"parallel": True} if parallel else {})})
    return out


# -- the whole collect -------------------------------------------------------------------------------------


def collect(family: Family, prompts: list[str] | None = None, progress: Callable[[str], None] = print,
            kernels_only: bool = False) -> dict:
    """The family's facts; ``kernels_only``: without the :data:`KERNEL_FREE` ones (not a page's facts)."""
    import nnsight
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.facts.edits import prove_edits
    from generator.facts.proof import prove_family
    from generator.facts.weight_rows import weight_rows

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per load would bury the build's own lines
    check_markers(family)
    parse_sources(family)
    family_module = import_module(family)
    check_identity(family, family_module)
    prompts = prompts or list(PROMPTS)
    # The tiny model's ops are too small to share among threads: one is faster, and steadier on a busy machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    # nnsight memoizes each instrumented forward by its code object, and equal code in two modeling files (a copied
    # eager_attention_forward at the same line) compares equal: without this, a family collected after another in
    # one process would be shown the other's file as where its values are read
    source_lines.forget_compiled()
    progress(f"{family.family}: checkpoint")
    checkpoint = checkpoint_dir(family)
    # what kernels the rest runs (not the checkpoint's build, once per machine): the capability comparison's choice
    kernel_log = KernelLog(on=not kernels_only)
    kernel_log.open()
    models = resolve_loads(family, family_module, checkpoint)
    try:
        progress(f"{family.family}: values under {', '.join(models.loads)}")
        hosts = host_rows(models, family, family_module, prompts)
        source_lines.annotate(models, hosts, family_module, prompts, run_inputs)
        check_value_claims(family, hosts)
        progress(f"{family.family}: relations on every block under every load")
        relations = prove_family(family, models, models.all, lambda m: run_inputs(m, family_module, prompts))
        proof_chain = check_family_chain(family, models)  # and they join into one chain from the inputs to the logits
        edits = None
        if not kernels_only:
            progress(f"{family.family}: edits")
            with kernel_log.paused():  # edits and the configs' meta models are KERNEL_FREE
                edits = prove_edits(family, models, family_module, prompts)
        identities = check_identities(family, models, family_module, prompts)
        from generator.facts.variants import collect_variants

        layouts = collect_variants(family, family_module, prompts, progress, kernels_only)  # each variant, proven the same way
        progress(f"{family.family}: full-size printout and configs")
        task = "image-text-to-text" if (family.get("page") or {}).get("vision") else "text-generation"
        tiny = models.get(models.default)
        causal_lm = type(tiny._module)
        with kernel_log.paused():
            printout_model = full_size(family, family_module, family.printout_checkpoint, task, causal_lm)
            configs, vision_configs, checkpoint_sizes = config_tables(family, family_module, task, causal_lm,
                                                    built={family.printout_checkpoint: printout_model}) \
                if not kernels_only else (None, None, None)
        family_traits = traits(family_module, tiny, printout_model)
        family_traits["checkpoints"] = checkpoint_settings(family)
        if "image" in models.loads:  # a tagline may name the vision block's norm
            family_traits["vision_norm"] = vision_norm(models.get("image"), family_module, prompts)
        full_size_notes(hosts, printout_model, family.printout_checkpoint)
        facts = {
            "schema": SCHEMA, "family": family.family, "module": family.module, "lines": list(family.lines), "group": family.group,
            "tagline": " ".join(family.tagline.split()), "tags": list(family.tags),
            "docstring": (family_module.__doc__ or "").strip(),
            "releases": family.raw.get("releases"),  # the range the YAML narrows it to (the Releases page says why)
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "nnsight": nnsight.__version__, "nncanon": nncanon.__version__},
            "tiny": {"sha256": family.tiny["sha256"], "num_layers": tiny.num_layers,
                     "config": family.tiny["config"]},
            "loads": {label: {"task": load.task, "kwargs": dict(load.kwargs), "base": load.base}
                      for label, load in models.loads.items()},
            "stack": stack(family, family_module, printout_model, models, identities, relations),
            "vision": vision(family, family_module, models, identities, printout_model, relations),
            "hosts": hosts,
            "relations": relations,
            "proof_chain": proof_chain,
            "edits": edits,
            # the full-size checkpoint's size of every layout dimension (the cheat sheet's numbers), read from its model
            "printout": {"checkpoint": family.printout_checkpoint, "text": repr(printout_model),
                         "dims": {name: int(size) for name, size in printout_model.dim_sizes().items()},
                         **block_dims(family_module, printout_model), **vision_dims(printout_model, task),
                         **host_dims(printout_model)},
            "configs": configs, "vision_configs": vision_configs, "sizes": checkpoint_sizes,
            "identities": identities,
            "traits": family_traits,
            "weights": weight_rows(tiny),  # every standard weight per host kind, measured (generator/site/weights_section.py)
            **transformers_hidden_states(models, family_module, prompts),
            "variants": layouts,
        }
        check_tags(family, facts)
        progress(f"{family.family}: notes and examples")
        facts.update(notes(family, checkpoint, models, progress))
        shared = (facts.get("vision_notes") or {}).get("shared")
        if shared is not None and hasattr(family_module, "vision_variants"):
            shared["variants"] = {**family_module.vision_variants(), **shared.get("variants", {})}
        if kernels_only:
            facts = {key: value for key, value in facts.items() if key not in KERNEL_FREE}
        else:
            kernel_log.close()
            facts["kernels"] = sorted(kernel_log.ran)  # cached_facts keeps them apart from the page's facts
        return json.loads(json.dumps(facts, sort_keys=True, default=str))
    finally:
        kernel_log.close()
        models.close()
        torch.set_num_threads(threads)


def vision(family: Family, family_module: Any, models: Models, identities: list[dict], full: Any,
           relations: list[dict]) -> dict | None:
    """The vision encoder's diagram: its chain counted on the full-size checkpoint, its parts checked on the tiny."""
    spec = (family.get("page") or {}).get("vision")
    if not spec:
        return None
    model = models.get("image")
    identity = next((i for i in identities if i["kind"] == "vision"), None)
    count = full.vision.num_layers
    chain = [dict(link, count=count) if link.get("module") == "layers" else dict(link) for link in spec["chain"]]
    mine = on_block(relations, "model.vision.layers[i]", 0)
    return {"class": type(model.vision._module).__name__, "line": spec["line"],
            "adds": flow([r["adds"] for r in mine if r["host"] == "model.vision.layers[i]" and r["adds"]]),
            "relations": [{"text": r["text"], "host": r["host"], "error": _worst(r["errors"])}
                          for r in mine],
            "num_layers": count, "chain": chain, "facts": [[k, v] for k, v in spec["facts"].items()],
            "identity": identity["expr"] if identity else None,
            "identity_error": identity["error"] if identity else None,
            "parts": parts(family, model, "vision.layers.0", "vision.layers[i]", spec.get("parts", []),
                           "page.vision"),
            **vision_produced(models, family_module)}


def notes(family: Family, checkpoint: Path, models: Models, progress: Callable[[str], None]) -> dict:
    """The notes, vision notes and SAE section, every expression evaluated and every code block run."""
    from generator.notes.examples import build_notes

    model = models.get("image") if "image" in models.loads else models.get(models.default)
    return build_notes(family, checkpoint, model=model, log=progress)


PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


# -- the cache key ---------------------------------------------------------------------------------


#: the generator's stages that make facts (generator/site only renders them: a change there re-renders, it does
#: not re-collect); the TransformerLens check keys its own cache (tl_names.annotations)
FACT_STAGES = ("recipe", "checkpoint", "notes", "facts")
NOT_FACTS = {"tl_names.py"}


def fact_sources(family: Family) -> list[Path]:
    """Every file a family's facts depend on: its YAML and notes (its own, and the shared notes), the
    library with its own family module (not the others'), and the generator's collecting modules."""
    directory = family.path.parent
    files = [family.path, *sorted(directory.glob(f"{family.family}.*.md")), *sorted((directory / "shared").glob("*.md"))]
    library = REPO_ROOT / "nncanon"
    own = library / "families" / f"{family.module.rsplit('.', 1)[-1]}.py"
    # the library, but of the family modules only this one (the shared parts live in nncanon/parts/)
    files += sorted(p for p in library.rglob("*.py")
                    if p.parent != library / "families" or p.name.startswith("_") or p == own)
    files += sorted(p for stage in FACT_STAGES for p in (REPO_ROOT / "generator" / stage).glob("*.py")
                    if p.name not in NOT_FACTS)
    return [*files, REPO_ROOT / "generator" / "kernel_log.py"]  # what the facts' kernel log records


def cache_key(family: Family) -> str:
    """A hash of everything that can change the facts (:func:`fact_sources`) and the versions of
    torch, transformers and nnsight. Editing one family's files re-collects that family only."""
    from importlib.metadata import version

    families = family.path.parent
    digest = hashlib.sha256()
    for path in fact_sources(family):
        if path.exists():
            # a family's files are named within their directory, so a copy of families/ (``$NNCANON_FAMILIES``,
            # as the tests build from) keys the same facts as the repository's, and its build reuses them; the
            # library's and the generator's files are the repository's own (fact_sources lists nothing else)
            if path.is_relative_to(families):
                where = Path("families") / path.relative_to(families)
            else:
                where = path.relative_to(REPO_ROOT)
            digest.update(where.as_posix().encode())
            digest.update(path.read_bytes())
    for package in ("torch", "transformers", "nnsight"):
        digest.update(f"{package}=={version(package)}".encode())
    return digest.hexdigest()[:20]


def build_dir() -> Path:
    """Where facts and the rendered docs go: ``build/``, or ``$NNCANON_BUILD``."""
    return Path(os.environ.get("NNCANON_BUILD") or REPO_ROOT / "build")


def facts_dir() -> Path:
    return build_dir() / "facts"


def _cache_paths(family: Family, kernels_only: bool) -> tuple[Path, Path, Path]:
    """The facts cache's directory, and the family's facts and key files in it."""
    directory = build_dir() / KERNEL_FACTS if kernels_only else facts_dir()
    return directory, directory / f"{family.family}.json", directory / f"{family.family}.key"


def _holds(path: Path, key_path: Path, key: str) -> bool:
    return path.exists() and key_path.exists() and key_path.read_text().strip() == key


def is_current(family: Family, kernels_only: bool = False) -> bool:
    """Whether the cache holds the family's facts under its current key (``cached_facts`` would collect nothing)."""
    _, path, key_path = _cache_paths(family, kernels_only)
    return _holds(path, key_path, cache_key(family))


def cached_facts(family: Family, progress: Callable[[str], None] = print,
                 force: bool = False, kernels_only: bool = False) -> tuple[dict, bool]:
    """The family's facts, collected only when the cache key changed. Returns (facts, collected).
    ``kernels_only``: :func:`collect`'s, kept in ``<build>/facts-kernels``, where no site reads them."""
    name = family.family
    key = cache_key(family)
    directory, path, key_path = _cache_paths(family, kernels_only)
    if not force and _holds(path, key_path, key):
        try:
            facts = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):  # cut short or damaged: the cache only saves time, so collect
            progress(f"{name}: {path} is not valid JSON; collecting again")
        else:
            progress(f"{name}: facts cached ({key})")
            return facts, False
    facts = collect(family, progress=progress, kernels_only=kernels_only)
    ran = facts.pop("kernels", None)
    with room(directory, BUILD):
        directory.mkdir(parents=True, exist_ok=True)
        if ran is not None:  # beside the facts, not in them: which family first runs a lazily built table is order's
            write_kernels(directory, name, ran)
        tmp = path.with_name(f".{name}.json.{os.getpid()}.tmp")  # its own: another process may write the same facts
        tmp.write_text(json.dumps(facts, sort_keys=True, indent=1) + "\n")
        tmp.replace(path)
        key_path.write_text(key + "\n")
    return facts, True


#: the size dimensions a vision block's layouts share with the text's (their encoder's own sizes there)
VISION_SIZE_DIMS = ("vision_hidden_size", "num_heads", "num_kv_heads", "head_dim", "qk_head_dim", "intermediate_size",
                    "stacked_width", "neck_channels")


def vision_dims(model: Any, task: str) -> dict:
    """``{"vision_dims": {name: size}}``: the full-size vision encoder's sizes of the dimensions its values' layouts
    name (``Queries [batch num_heads seq qk_head_dim]`` means the encoder's heads under ``model.vision``), so the
    cheat sheet does not size them by the text model's; nothing for a text-only page."""
    if task != "image-text-to-text":
        return {}
    sizes = model.vision.dim_sizes()
    return {"vision_dims": {name: int(sizes[name]) for name in VISION_SIZE_DIMS if name in sizes}}


def block_dims(family_module: Any, model: Any) -> dict:
    """``{"block_dims": [{"blocks": [...], "dims": {name: size}}]}``: the blocks whose own sizes differ from the
    model's (a family's ``block_dim_sizes``: Gemma 4's full-attention heads), grouped by those sizes; nothing for a
    family whose blocks all have the model's sizes, so its facts are as they were."""
    if not hasattr(family_module, "block_dim_sizes"):
        return {}
    overall = model.dim_sizes()
    groups: dict[tuple, list[int]] = {}
    for block in range(model.num_layers):
        own = model.dim_sizes(block=block)
        differ = tuple(sorted((name, int(size)) for name, size in own.items() if overall.get(name) != size))
        if differ:
            groups.setdefault(differ, []).append(block)
    return {"block_dims": [{"blocks": blocks, "dims": dict(differ)} for differ, blocks in groups.items()]}
