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

import contextlib
import hashlib
import importlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.family import REPO_ROOT, Family, FamilyYamlError, get_family

SCHEMA = 1


class ClaimError(AssertionError):
    """A claim of the family YAML does not hold on the model; the message names the claim."""

    def __init__(self, family: str, claim: str, problem: str):
        self.family, self.claim = family, claim
        super().__init__(f"{family}: claim {claim}: {problem}")


# -- the load conditions a page talks about ------------------------------------------


@dataclass(frozen=True)
class Load:
    """One way to load the family: a label the page shows, the task and from_pretrained kwargs.

    A load with ``base`` reuses that load's model under ``context(model)``, a context manager
    (a kernel route, or "as if flash-linear-attention were installed"): routes are per family for
    the whole process, so they are entered around each use, never left on.
    """

    label: str
    task: str = "text-generation"
    kwargs: tuple[tuple[str, Any], ...] = ()
    base: str | None = None
    context: Callable[[Any], Any] | None = None

    def within(self, model: Any) -> Any:
        return self.context(model) if self.context is not None else contextlib.nullcontext()


def default_loads(family: Family, family_module: Any) -> list[Load]:
    """sdpa (the default) and eager attention, eager experts, any loads the family module adds
    (EXTRA_LOADS: kernel routes), and the multimodal task when the page has a vision encoder."""
    loads = [Load("sdpa"), Load("eager", kwargs=(("attn_implementation", "eager"),)),
             Load("experts eager", kwargs=(("experts_implementation", "eager"),))]
    if hasattr(family_module, "KERNELS"):  # a DeltaNet family: its kernel routes
        from nncanon import kernels

        loads += [Load('route_kernels "torch"', base="sdpa",
                       context=lambda model: kernels.route_kernels(model.family, "torch")),
                  Load("flash-linear-attention installed", base="sdpa",
                       context=lambda model: kernels.assume_fla(model.family))]
    if (family.get("page") or {}).get("vision"):
        loads.append(Load("image", task="image-text-to-text"))
    return loads


class Models:
    """The tiny checkpoint loaded once per load condition, on demand."""

    def __init__(self, checkpoint: Path, loads: list[Load]):
        self.checkpoint = checkpoint
        self.loads = {load.label: load for load in loads}
        self._cache: dict[str, Any] = {}

    def get(self, label: str) -> Any:
        load = self.loads[label]
        if load.base is not None:
            return self.get(load.base)
        if label not in self._cache:
            import nncanon

            self._cache[label] = nncanon.load(self.checkpoint, task=load.task, **dict(load.kwargs))
        return self._cache[label]

    def close(self) -> None:
        self._cache.clear()


# -- paths ------------------------------------------------------------------------------

_INDEX = re.compile(r"\[i\]")


def concrete(path: str, index: int) -> str:
    """``layers[i].mlp`` -> ``layers.3.mlp`` (nnsight's get() walks ModuleList entries by name)."""
    return _INDEX.sub(f".{index}", path).replace("[", ".").replace("]", "")


def relative(host: str) -> str:
    """``model.layers[i].mlp`` -> ``layers[i].mlp``; ``model`` -> ``""``."""
    return host[len("model."):] if host.startswith("model.") else ""


def block_index(model: Any, host: str) -> int:
    """A block that has ``host`` (the first DeltaNet block for linear_attn, ...)."""
    leaf = relative(host).split(".")[1:2] if relative(host).startswith("layers[i].") else []
    for index in range(model.num_layers):
        if not leaf or hasattr(model.get(concrete("layers[i]", index)), leaf[0]):
            return index
    raise LookupError(host)


# -- measuring values --------------------------------------------------------------------


def run_inputs(model: Any, family_module: Any, prompts: list[str]) -> tuple[tuple, dict]:
    """What a trace of this model is called with (the family says how images go in)."""
    if model.task == "image-text-to-text" and hasattr(family_module, "trace_inputs"):
        return family_module.trace_inputs(model)
    return (prompts,), {}


def measure(model: Any, path: str, name: str, args: tuple, kwargs: dict) -> dict | None:
    """Shape and dtype of one value read on ``model`` at the concrete host ``path``."""
    import torch

    with torch.no_grad(), model.trace(*args, **kwargs):
        host = model.get(path) if path else model
        read = getattr(host, name).save()
    if read is None:
        return {"shape": None, "dtype": "None", "value": None}
    if isinstance(read, torch.Tensor):
        return {"shape": list(read.shape), "dtype": str(read.dtype).removeprefix("torch."), "value": None}
    return {"shape": None, "dtype": type(read).__name__, "value": read if isinstance(read, (int, list)) else None}


def check_dims(family: str, where: str, dims: tuple[str, ...], shape: list[int] | None, sizes: dict) -> None:
    if shape is None:
        return
    if len(dims) != len(shape):
        raise ClaimError(family, f"layout of {where}", f"the layout has {len(dims)} dims {list(dims)} but the "
                                                          f"value measured {shape} on the tiny checkpoint")
    for dim, size in zip(dims, shape):
        if dim in sizes and sizes[dim] != size:
            raise ClaimError(family, f"layout of {where}",
                             f"dim {dim!r} should be {sizes[dim]} on the tiny checkpoint but measured {size} "
                             f"(shape {shape})")


# -- the family's values, by host ------------------------------------------------------------


def host_rows(models: Models, loads: list[Load], family: Family, family_module: Any, prompts: list[str]) -> list[dict]:
    """One entry per host with every value: layout, read at, conditions, availability, measured shape."""
    by_host: dict[str, dict] = {}
    for load in loads:
        model = models.get(load.label)
        with load.within(model):
            rows = model.support()
        for name, (cls, native) in model.host_classes().items():
            entry = by_host.setdefault(name, {"path": name, "class": native, "section": section_of(name),
                                              "values": {}, "cls": cls})
            if load.task == "image-text-to-text" or entry["class"] == native:
                entry["class"] = native
            for row in rows:
                if row.host != name:
                    continue
                value = entry["values"].setdefault(row.name, _value_entry(row, cls))
                value["availability"][load.label] = row.available
                if row.available and value["measured"] is None:
                    with load.within(model):
                        value["measured"] = _measure_value(models, load, family, family_module, name, row, prompts)
    hosts = []
    for entry in by_host.values():
        entry.pop("cls")
        entry["values"] = list(entry["values"].values())
        hosts.append(entry)
    return hosts


def section_of(host: str) -> str:
    return "vision" if host.startswith("model.vision") else "text"


def _value_entry(row: Any, cls: type) -> dict:
    value = next(v for v in cls.values() if v.name == row.name)
    conditions = [{"needs": c.needs, "why": c.why} for c in value.conditions]
    return {"name": row.name, "layout": value.layout.name, "dims": list(value.layout.dims),
            "description": row.description, "read_at": row.read_at, "conditions": conditions,
            "note": value.note if isinstance(value.note, str) else None, "availability": {}, "measured": None,
            "writable": value.writable}


def full_size_notes(hosts: list[dict], full: Any, checkpoint_id: str) -> None:
    """Notes that depend on the config (the size of ``states``) are given for the full-size checkpoint."""
    for name, (cls, _) in full.host_classes().items():
        entry = next((h for h in hosts if h["path"] == name), None)
        for value in cls.values():
            if entry is not None and callable(value.note):
                row = next(v for v in entry["values"] if v["name"] == value.name)
                row["note"] = f"{value.note(full)} on {checkpoint_id}"


def _measure_value(models: Models, load: Load, family: Family, family_module: Any, host: str, row: Any,
                   prompts: list[str]) -> dict | None:
    model = models.get(load.label)
    path = relative(host)
    if "[i]" in path:
        index = block_index(model, host) if path.startswith("layers") else 1
        path = concrete(path, index)
    args, kwargs = run_inputs(model, family_module, prompts)
    measured = measure(model, path, row.name, args, kwargs)
    sizes = {**model.dim_sizes(), **_input_sizes(model, family_module, args, kwargs)}
    if host.startswith("model.vision.layers"):
        # the vision blocks' layouts reuse the text dimension names with the encoder's sizes
        sizes.update(model.vision.dim_sizes(patches=sizes["patches"]))
    elif path and isinstance(getattr(model.get(path)._module, "intermediate_size", None), int):
        sizes["intermediate_size"] = model.get(path)._module.intermediate_size  # this MLP's own width
    check_dims(family.family, f"{host}.{row.name}", row.dims, measured["shape"], sizes)
    return measured


def _input_sizes(model: Any, family_module: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    cached = getattr(model, "_collect_input_sizes", None)
    if cached is None:
        cached = model._collect_input_sizes = _measure_input_sizes(model, family_module, args, kwargs)
    return cached


def _measure_input_sizes(model: Any, family_module: Any, args: tuple, kwargs: dict) -> dict[str, int]:
    import torch

    with torch.no_grad(), model.trace(*args, **kwargs):
        ids = model.input_ids.save()
    batch, seq = ids.shape
    sizes = {"batch": batch, "seq": seq, "query": seq, "key": seq}
    if model.task == "image-text-to-text" and hasattr(family_module, "image_sizes"):
        sizes.update(family_module.image_sizes(model, args, kwargs))
    return sizes


# -- claims of the YAML ----------------------------------------------------------------------------


def check_value_claims(family: Family, hosts: list[dict]) -> None:
    """The YAML's ``claims.values`` (host -> value -> layout, read_at) equal the code's, one for one."""
    claims = (family.get("claims") or {}).get("values")
    if claims is None:
        return
    ours = {h["path"]: {v["name"]: v for v in h["values"]} for h in hosts}
    for host, values in claims.items():
        if host not in ours:
            raise FamilyYamlError(family.path, f"claims.values.{host}",
                                  f"no such host; the family has {', '.join(ours)}")
        for name, claim in values.items():
            where = f"claims.values.{host}.{name}"
            if name not in ours[host]:
                raise FamilyYamlError(family.path, where, f"{host} has no value {name!r}")
            value = ours[host][name]
            layout = f"{value['layout']} [{' '.join(value['dims'])}]" if value["dims"] else value["layout"]
            if claim.get("layout") != layout:
                raise ClaimError(family.family, f"{host}.{name} layout",
                                 f"the YAML says {claim.get('layout')!r}, the code serves {layout!r}")
            if claim.get("read_at") != value["read_at"]:
                raise ClaimError(family.family, f"{host}.{name} read at",
                                 f"the YAML says {claim.get('read_at')!r}, the locator reads "
                                 f"{value['read_at']!r}")
        missing = set(ours[host]) - set(values)
        if missing:
            raise FamilyYamlError(family.path, f"claims.values.{host}",
                                  f"the code serves {', '.join(sorted(missing))} here, which the YAML does not claim")


def read_term(model: Any, path: str, args: tuple, kwargs: dict) -> Any:
    """Read one term of an identity: a concrete path ending in a value, ``input`` or ``output``."""
    import torch

    host, _, name = path.rpartition(".")
    with torch.no_grad(), model.trace(*args, **kwargs):
        envoy = model.get(host)
        read = getattr(envoy, name).save()
    return read


def block_of_kind(model: Any, family_module: Any, kind: str) -> str:
    """The concrete path of the first block of ``kind`` on ``model`` ("vision": the first vision block)."""
    if kind == "vision":
        return "vision.layers.0"
    types = family_module.layer_types(model)
    if kind not in types:
        raise LookupError(f"no {kind} block on this model (kinds: {sorted(set(types))})")
    return f"layers.{types.index(kind)}"


def resolve_term(term: str, block: str) -> str:
    """``layers[i].input`` -> ``layers.3.input``; ``mlp.mlp_output`` -> ``layers.3.mlp.mlp_output``."""
    term = term.strip()
    index = int(block.rsplit(".", 1)[-1])
    return concrete(term, index) if "[i]" in term else f"{block}.{term}"


def check_identities(family: Family, models: Models, family_module: Any, prompts: list[str]) -> list[dict]:
    """Evaluate each ``claims.identities`` entry on a block of its kind; record its error."""

    results = []
    for n, claim in enumerate((family.get("claims") or {}).get("identities", [])):
        field = f"claims.identities[{n}]"
        if not isinstance(claim, dict) or "expr" not in claim or "kind" not in claim:
            raise FamilyYamlError(family.path, field, "expected a mapping with kind and expr")
        expr, kind = claim["expr"], claim["kind"]
        if expr.count("==") != 1:
            raise FamilyYamlError(family.path, f"{field}.expr", f"expected 'a + b + ... == c', got {expr!r}")
        model = models.get(claim.get("load") or ("image" if kind == "vision" else "sdpa"))
        block = block_of_kind(model, family_module, kind)
        args, kwargs = run_inputs(model, family_module, prompts)
        lhs, rhs = expr.split("==")
        try:
            terms = [read_term(model, resolve_term(t, block), args, kwargs) for t in lhs.split("+")]
            target = read_term(model, resolve_term(rhs, block), args, kwargs)
        except AttributeError as error:
            raise ClaimError(family.family, f"identity {expr!r}", f"a term does not resolve on {block}: {error}") from None
        total = terms[0]
        for term in terms[1:]:
            total = total + term  # left to right, as the block adds them
        error = float((total - target).abs().max())
        tolerance = float(claim.get("tolerance", 0.0))
        if not error <= tolerance:
            raise ClaimError(family.family, f"identity {expr!r}",
                             f"off by {error:.3g} on {block} of the tiny checkpoint (tolerance {tolerance})")
        results.append({"expr": expr, "kind": kind, "where": re.sub(r"\.(\d+)", r"[\1]", block), "error": error})
    return results


# -- full-size configs: printout and tables ------------------------------------------------------------


def full_size(family: Family, family_module: Any, checkpoint_id: str, task: str, causal_lm: type) -> Any:
    """The StandardModel of a full-size checkpoint on the meta device (no weights); ``causal_lm`` is
    the text-only class the family builds for text-generation."""
    import nncanon
    from generator.checkpoints import checkpoint_dir, meta_model
    from nncanon.processing import load_processor

    module = meta_model(family, checkpoint_id)
    directory = checkpoint_dir(family)
    if task == "text-generation":
        from nncanon.families import _loading

        module = _loading.meta(causal_lm, module.config.get_text_config())
        return nncanon.wrap(family_module, module, task, tokenizer=_loading.tokenizer(directory), device="meta")
    processor = load_processor(directory)
    return nncanon.wrap(family_module, module, task, tokenizer=processor.tokenizer, processor=processor,
                        device="meta")


TEXT_ACCESSORS = ("num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim", "qk_head_dim", "vocab_size")
VISION_ACCESSORS = ("num_layers", "vision_hidden_size", "num_heads", "head_dim", "intermediate_size", "patch_size",
                    "image_size", "spatial_merge_size", "window_size")


def accessors(host: Any, prefix: str, names: tuple[str, ...]) -> list[list]:
    """``[[f"{prefix}.{name}", value], ...]``; an Unavailable accessor reads "varies"."""
    import nncanon

    rows = []
    for name in names:
        try:
            rows.append([f"{prefix}.{name}", getattr(host, name)])
        except nncanon.Unavailable:
            rows.append([f"{prefix}.{name}", "varies"])
    return rows


def raw_fields(family: Family, raw: dict, fields: list[str], sub: str) -> list[list]:
    """The config's own fields the page lists, from ``sub`` (text_config, vision_config) or the top."""
    config = raw.get(sub, {})
    rows = []
    for name in fields:
        if name in config:
            rows.append([name, config[name]])
        elif name in raw:
            rows.append([name, raw[name]])
        elif name == "full_attention_interval" and "layer_types" in config:
            rows.append([name, config["layer_types"].index("full_attention") + 1])
        else:
            raise FamilyYamlError(family.path, f"page.config_fields ({name})",
                                  f"not a field of {sub} nor of the config")
    return rows


def config_tables(family: Family, family_module: Any, task: str, causal_lm: type,
                  built: dict[str, Any] | None = None) -> tuple[list[dict], list[dict]]:
    """Accessors and raw fields per full-size checkpoint; checkpoints with equal tables share one."""
    page = family.get("page") or {}
    text_tables: list[dict] = []
    vision_tables: list[dict] = []
    for checkpoint_id in family.checkpoint_ids:
        model = (built or {}).get(checkpoint_id) or full_size(family, family_module, checkpoint_id, task, causal_lm)
        raw = family.checkpoint_config(checkpoint_id)
        text = {"accessors": accessors(model, "model", TEXT_ACCESSORS),
                "raw": raw_fields(family, raw, page.get("config_fields", []), "text_config")}
        _merge(text_tables, checkpoint_id, text)
        if task == "image-text-to-text" and page.get("vision"):
            vision = {"accessors": accessors(model.vision, "model.vision", VISION_ACCESSORS),
                      "raw": raw_fields(family, raw, page.get("vision_config_fields", []), "vision_config")}
            _merge(vision_tables, checkpoint_id, vision)
    return text_tables, vision_tables


def _merge(tables: list[dict], checkpoint_id: str, table: dict) -> None:
    for existing in tables:
        if existing["accessors"] == table["accessors"] and existing["raw"] == table["raw"]:
            existing["also"].append(checkpoint_id)
            return
    tables.append({"checkpoint": checkpoint_id, "also": [], **table})


# -- the page's structure ---------------------------------------------------------------------------


def stack(family: Family, family_module: Any, printout_model: Any, models: Models, identities: list[dict]) -> dict:
    page = family.get("page") or {}
    kinds = page.get("block_kinds") or {}
    blocks = family_module.layer_types(printout_model)
    tiny = models.get("sdpa")
    block_kinds = []
    for kind, spec in kinds.items():
        if kind not in blocks:
            raise ClaimError(family.family, f"page.block_kinds.{kind}", f"no block of kind {kind!r} on "
                                                                         f"{family.printout_checkpoint}")
        identity = next((i for i in identities if i["kind"] == kind), None)
        block = block_of_kind(tiny, family_module, kind)
        block_kinds.append({
            "kind": kind, "label": spec["label"], "mixer": spec["mixer"],
            "identity": identity["expr"] if identity else None,
            "identity_error": identity["error"] if identity else None,
            "parts": parts(family, tiny, block, "layers[i]", spec.get("parts", []), f"page.block_kinds.{kind}"),
        })
    return {
        "checkpoint": family.printout_checkpoint, "num_layers": len(blocks),
        "chain": [{"module": "embed_tokens", "value": "token_embeddings"},
                  {"module": "layers", "count": len(blocks)},
                  {"module": "norm", "value": "final_norm_output"},
                  {"module": "lm_head", "value": "lm_head_output"},
                  {"module": "logits", "value": "the output"}],
        "blocks": blocks, "block_kinds": block_kinds,
    }


def parts(family: Family, model: Any, block: str, standard: str, declared: list, field: str) -> list[dict]:
    """Diagram parts: each names a module under the block and the value drawn at it; both must exist.

    ``value`` is a value name of the block's host, or ``child.value`` for a value of a child host.
    """
    out = []
    for n, (part, value) in enumerate(declared):
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
        out.append({"id": f"{standard}.{part}", "label": part.rsplit(".", 1)[-1], "value": name, "host": host_std})
    return out


def traits(family_module: Any, tiny: Any, full: Any) -> dict:
    """What the families index compares, measured on the tiny checkpoint or read off the full-size
    config (never typed): MLP kind, block norm and its gain, q/k norms, attention quirks."""
    import torch

    config = full.text_config
    types = family_module.layer_types(tiny)
    attention = next((i for i, t in enumerate(types) if t == "full_attention"), None)
    block = tiny._module.get_decoder().layers[attention if attention is not None else 0]
    mlp = tiny.get(f"layers.{attention if attention is not None else 0}.mlp")
    if hasattr(mlp._module, "experts"):
        mlp_kind = "mixture + shared expert" if any(
            hasattr(mlp._module, name) for name in ("shared_expert", "shared_experts")) else "mixture"
    else:
        mlp_kind = "gated" if hasattr(mlp._module, "gate_proj") else "plain"
    norm = block.input_layernorm
    x = torch.randn(3, norm.weight.shape[-1], generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
        rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        out = norm(x)
        gain = "1 + weight" if torch.allclose(out, rms * (1 + norm.weight), atol=1e-4) else (
            "weight" if torch.allclose(out, rms * norm.weight, atol=1e-4) else "other")
    attn = getattr(block, "self_attn", None)
    quirks = []
    rope = dict(getattr(config, "rope_parameters", None) or {})
    if attn is not None and hasattr(attn, "q_norm"):
        quirks.append("q/k norms")
    if attn is not None and attn.q_proj.out_features == 2 * tiny.num_heads * tiny.head_dim:
        quirks.append("gated output")
    if rope.get("partial_rotary_factor", 1.0) < 1.0:
        quirks.append(f"partial rotary ({rope['partial_rotary_factor']:g})")
    if rope.get("mrope_section"):
        quirks.append("multimodal rotary")
    if rope.get("rope_type") not in (None, "default"):
        quirks.append(f"{rope['rope_type']} rope scaling")
    if config.num_key_value_heads < config.num_attention_heads:
        quirks.append("grouped-query")
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        quirks.append("sliding window")
    kind = type(norm).__name__
    kind = "RMSNorm" if "RMSNorm" in kind else "LayerNorm" if "LayerNorm" in kind else kind
    return {"mlp": mlp_kind, "norm": kind,
            "norm_gain": gain, "attention": quirks,
            "block_kinds": sorted(set(family_module.layer_types(full)))}


#: tags whose claim the measured traits can check: tag -> (what must hold, the check)
TAG_CHECKS: dict[str, tuple[str, Callable[[dict, dict], bool]]] = {
    "Hybrid": ("more than one kind of block", lambda t, f: len(t["block_kinds"]) > 1),
    "Mixture of experts": ("a mixture MLP", lambda t, f: t["mlp"].startswith("mixture")),
    "Query/key norms": ("q/k norms", lambda t, f: "q/k norms" in t["attention"]),
    "Gated query": ("a gated attention output", lambda t, f: "gated output" in t["attention"]),
    "Partial rotary": ("a partial rotary", lambda t, f: any(q.startswith("partial rotary") for q in t["attention"])),
    "Multimodal rotary": ("a multimodal rotary", lambda t, f: "multimodal rotary" in t["attention"]),
    "Grouped-query attention": ("fewer kv heads than heads", lambda t, f: "grouped-query" in t["attention"]),
    "1 + weight norm gain": ("a 1 + weight norm gain", lambda t, f: t["norm_gain"] == "1 + weight"),
    "Vision-language": ("a vision encoder", lambda t, f: f.get("vision") is not None),
}


def check_tags(family: Family, facts: dict) -> None:
    """A tag the traits can check must hold: "Mixture of experts" on a dense family fails the build."""
    for tag in family.tags:
        if tag in TAG_CHECKS:
            needs, holds = TAG_CHECKS[tag]
            if not holds(facts["traits"], facts):
                raise ClaimError(family.family, f"tag {tag!r}", f"needs {needs}, which the measured traits "
                                                                f"{facts['traits']} do not show")


# -- the whole collect -------------------------------------------------------------------------------------


def collect(name: str, prompts: list[str] | None = None, progress: Callable[[str], None] = print) -> dict:
    import nnsight
    import torch
    import transformers

    import nncanon
    from generator.checkpoints import checkpoint_dir

    family = get_family(name)
    family_module = importlib.import_module(family.module)
    prompts = prompts or list(PROMPTS)
    # The tiny model's ops are too small to share among threads: one is faster, and steadier on a busy machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    progress(f"{family.family}: checkpoint")
    checkpoint = checkpoint_dir(family)
    loads = default_loads(family, family_module)
    models = Models(checkpoint, loads)
    try:
        progress(f"{family.family}: values under {', '.join(load.label for load in loads)}")
        hosts = host_rows(models, loads, family, family_module, prompts)
        check_value_claims(family, hosts)
        progress(f"{family.family}: identities")
        identities = check_identities(family, models, family_module, prompts)
        progress(f"{family.family}: full-size printout and configs")
        task = "image-text-to-text" if (family.get("page") or {}).get("vision") else "text-generation"
        causal_lm = type(models.get("sdpa")._module)
        printout_model = full_size(family, family_module, family.printout_checkpoint, task, causal_lm)
        configs, vision_configs = config_tables(family, family_module, task, causal_lm,
                                                built={family.printout_checkpoint: printout_model})
        family_traits = traits(family_module, models.get("sdpa"), printout_model)
        full_size_notes(hosts, printout_model, family.printout_checkpoint)
        facts = {
            "schema": SCHEMA, "family": family.family, "module": family.module, "lines": list(family.lines),
            "tagline": " ".join(family.tagline.split()), "tags": list(family.tags),
            "docstring": (family_module.__doc__ or "").strip(),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "nnsight": nnsight.__version__, "nncanon": nncanon.__version__},
            "tiny": {"sha256": family.tiny["sha256"], "num_layers": models.get("sdpa").num_layers,
                     "config": family.tiny["config"]},
            "stack": stack(family, family_module, printout_model, models, identities),
            "vision": vision(family, family_module, models, identities, printout_model),
            "hosts": hosts,
            "printout": {"checkpoint": family.printout_checkpoint, "text": repr(printout_model)},
            "configs": configs, "vision_configs": vision_configs,
            "identities": identities,
            "traits": family_traits,
        }
        check_tags(family, facts)
        progress(f"{family.family}: notes and examples")
        facts.update(notes(family, checkpoint, models, progress))
        shared = (facts.get("vision_notes") or {}).get("shared")
        if shared is not None and hasattr(family_module, "vision_variants"):
            shared["variants"] = {**family_module.vision_variants(), **shared.get("variants", {})}
        return json.loads(json.dumps(facts, sort_keys=True, default=str))
    finally:
        models.close()
        torch.set_num_threads(threads)


def vision(family: Family, family_module: Any, models: Models, identities: list[dict], full: Any) -> dict | None:
    """The vision encoder's diagram: its chain counted on the full-size checkpoint, its parts checked on the tiny."""
    spec = (family.get("page") or {}).get("vision")
    if not spec:
        return None
    model = models.get("image")
    identity = next((i for i in identities if i["kind"] == "vision"), None)
    count = full.vision.num_layers
    chain = [dict(link, count=count) if link.get("module") == "layers" else dict(link) for link in spec["chain"]]
    return {"class": type(model.vision._module).__name__, "line": spec["line"],
            "num_layers": count, "chain": chain, "facts": [[k, v] for k, v in spec["facts"].items()],
            "identity": identity["expr"] if identity else None,
            "identity_error": identity["error"] if identity else None,
            "parts": parts(family, model, "vision.layers.0", "vision.layers[i]", spec.get("parts", []),
                           "page.vision")}


def notes(family: Family, checkpoint: Path, models: Models, progress: Callable[[str], None]) -> dict:
    """The notes, vision notes and SAE section, every expression evaluated and every code block run."""
    from generator.examples import build_notes

    model = models.get("image") if "image" in models.loads else models.get("sdpa")
    return build_notes(family, checkpoint, model=model, log=progress)


PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]


# -- the cache key ---------------------------------------------------------------------------------


def cache_key(name: str | Family) -> str:
    """A hash of everything that can change the facts: the YAML and notes, the library's and the
    generator's source, and the versions of torch, transformers and nnsight."""
    from importlib.metadata import version

    family = get_family(name)
    digest = hashlib.sha256()
    files = [family.path, *sorted(family.path.parent.rglob("*.md"))]
    files += sorted((REPO_ROOT / "nncanon").rglob("*.py"))
    files += [REPO_ROOT / "generator" / n for n in ("collect.py", "examples.py", "checkpoints.py", "family.py")]
    for path in files:
        if path.exists():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    for package in ("torch", "transformers", "nnsight"):
        digest.update(f"{package}=={version(package)}".encode())
    return digest.hexdigest()[:20]


def build_dir() -> Path:
    """Where facts and the rendered docs go: ``build/``, or ``$NNCANON_BUILD``."""
    return Path(os.environ.get("NNCANON_BUILD") or REPO_ROOT / "build")


def facts_dir() -> Path:
    return build_dir() / "facts"


def cached_facts(name: str, progress: Callable[[str], None] = print, force: bool = False) -> tuple[dict, bool]:
    """The family's facts, collected only when the cache key changed. Returns (facts, collected)."""
    key = cache_key(get_family(name))
    directory = facts_dir()
    path, key_path = directory / f"{name}.json", directory / f"{name}.key"
    if not force and path.exists() and key_path.exists() and key_path.read_text().strip() == key:
        progress(f"{name}: facts cached ({key})")
        return json.loads(path.read_text()), False
    facts = collect(name, progress=progress)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(facts, sort_keys=True, indent=1) + "\n")
    tmp.replace(path)
    key_path.write_text(key + "\n")
    return facts, True
