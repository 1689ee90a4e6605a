"""Full-size checkpoints on the meta device: the printout's model and the config tables."""

from __future__ import annotations

import json
from typing import Any

from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError

# -- full-size configs: printout and tables ------------------------------------------------------------


def full_size(family: Family, family_module: Any, checkpoint_id: str, task: str, causal_lm: type) -> Any:
    """The StandardModel of a full-size checkpoint on the meta device (no weights), built as a meta-first
    ``nncanon.load`` builds it (`nncanon.core.loading.meta_module`); ``causal_lm`` is the class the tiny load built,
    which the meta build must match."""
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.checkpoint.meta_models import meta_config, meta_model
    from nncanon.core.loading import meta_module
    from nncanon.core.processing import load_processor

    directory = checkpoint_dir(family)
    if task == "text-generation":
        from nncanon.parts import loading

        module = meta_module(family_module, meta_config(family, checkpoint_id)[0], task)
        if type(module) is not causal_lm:
            raise nncanon.FamilyMismatch(f"{family.family}: a meta-first load builds {type(module).__name__}, the "
                                         f"tiny checkpoint loads {causal_lm.__name__}; set build.causal_lm")
        return nncanon.wrap(family_module, module, task, tokenizer=loading.tokenizer(directory), device="meta")
    module = meta_model(family, checkpoint_id)
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


def layout_dims(model: Any) -> dict[str, int]:
    """Every layout dimension's size on this full-size model (`StandardModel.dim_sizes`), so a page can give a
    value's full-size shape from its layout alone (the Recurrent state page); a size a config leaves open
    (an Unavailable accessor) is left out."""
    import nncanon

    sizes = {}
    for name in ("hidden_size", "vocab_size", "num_heads", "num_kv_heads", "head_dim", "qk_head_dim"):
        try:
            sizes[name] = getattr(model, name)
        except nncanon.Unavailable:
            pass
    return {**sizes, **model.family_module.dim_sizes(model)}


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


def sizes(checkpoint_id: str, model: Any) -> dict:
    """The families index's numbers for one full-size checkpoint, read from its meta model: blocks, width,
    heads, experts, parameters (each shared tensor once, as ``parameters()`` yields it) and the context the
    config declares (None where the model has no positions to run out of)."""
    import nncanon

    dims = model.dim_sizes()
    # attention heads only: a state-space mixer's heads (Mamba-2's, Mamba-1's channels) are not what the column says
    heads = getattr(model.text_config, "num_attention_heads", None)
    try:
        kv_heads = model.num_kv_heads if heads else None
    except (AttributeError, nncanon.Unavailable):  # a stack with no one kv-head count
        kv_heads = None
    total = sum(p.numel() for p in model._module.parameters())
    return {"checkpoint": checkpoint_id, "blocks": model.num_layers, "width": model.hidden_size,
            "heads": heads, "kv_heads": kv_heads, "experts": dims.get("num_experts"), "top_k": dims.get("top_k"),
            "parameters": total, "active": active_parameters(model, total, dims),
            "head_dim": dims.get("head_dim") if heads else None,
            "context": getattr(model.text_config, "max_position_embeddings", None)}


def active_parameters(model: Any, total: int, dims: dict) -> int:
    """The parameters one token's forward uses: all of them, but of each mixture's routed experts only the top_k of
    num_experts it is routed to (a routed expert is a child named ``experts``, its weights stacked or a list; a
    shared expert is another child and always runs). Counted on the meta model, as the total is."""
    experts, top_k = dims.get("num_experts"), dims.get("top_k")
    if not experts or not top_k:
        return total
    routed = {id(p): p.numel() for name, module in model._module.named_modules() if name.rsplit(".", 1)[-1] == "experts"
              for p in module.parameters()}
    return total - round(sum(routed.values()) * (1 - top_k / experts))


def config_tables(family: Family, family_module: Any, task: str, causal_lm: type,
                  built: dict[str, Any] | None = None) -> tuple[list[dict], list[dict], list[dict]]:
    """Accessors and raw fields per full-size checkpoint (checkpoints with equal tables share one), and each
    checkpoint's `sizes`."""
    page = family.get("page") or {}
    text_tables: list[dict] = []
    vision_tables: list[dict] = []
    checkpoint_sizes: list[dict] = []
    # a checkpoint whose config equals one already built (a base and its instruct, `same_as`) reuses its model:
    # a full-size meta model and its envoy tree are most of a collect's cost for a family of large mixtures
    by_config = {json.dumps(family.checkpoint_config(cid), sort_keys=True): model for cid, model in (built or {}).items()}
    for checkpoint_id in family.checkpoint_ids:
        raw = family.checkpoint_config(checkpoint_id)
        key = json.dumps(raw, sort_keys=True)
        model = by_config.get(key) or full_size(family, family_module, checkpoint_id, task, causal_lm)
        by_config[key] = model
        checkpoint_sizes.append(sizes(checkpoint_id, model))
        inferred = inferred_fields(family, checkpoint_id)
        text = {"accessors": accessors(model, "model", TEXT_ACCESSORS),
                "raw": raw_fields(family, raw, page.get("config_fields", []), "text_config"),
                "dims": layout_dims(model)}
        _merge(text_tables, checkpoint_id, text, inferred)
        if task == "image-text-to-text" and page.get("vision"):
            vision = {"accessors": accessors(model.vision, "model.vision", VISION_ACCESSORS),
                      "raw": raw_fields(family, raw, page.get("vision_config_fields", []), "vision_config")}
            _merge(vision_tables, checkpoint_id, vision, inferred)
    return text_tables, vision_tables, checkpoint_sizes


def inferred_fields(family: Family, checkpoint_id: str) -> list[list[str]]:
    """``[[checkpoint, field, why], ...]``: what the YAML marks as inferred, not read, for this checkpoint."""
    entry = next(c for c in family.checkpoints if c["id"] == checkpoint_id)
    out = []
    for key, why in (entry.get("inferred") or {}).items():
        if key == "same_as":
            why = f"taken to be {entry['same_as']}'s config: {why}"
        elif key == "config":
            why = f"the whole config: {why}"
        out.append([checkpoint_id, key, why])
    return out


def _merge(tables: list[dict], checkpoint_id: str, table: dict, inferred: list[list[str]]) -> None:
    """Checkpoints whose tables are equal share a column; what each infers stays named by checkpoint."""
    for existing in tables:
        if existing["accessors"] == table["accessors"] and existing["raw"] == table["raw"]:
            existing["also"].append(checkpoint_id)
            existing["inferred"] += inferred
            return
    tables.append({"checkpoint": checkpoint_id, "also": [], **table, "inferred": inferred})
