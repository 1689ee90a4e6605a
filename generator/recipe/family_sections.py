"""The checks of a family YAML's sections beyond their shape: ``page``, ``claims``, the config
sizes, the notes' paths and the family module (called by :func:`generator.recipe.family.load_family`).

Each allowed key is listed in a constant below, from how the generator reads the section
(``page`` and ``claims``: generator/facts/collect.py). Every problem raises
:class:`~generator.recipe.family.FamilyYamlError` naming the file and the dotted field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from generator.recipe.fields import (
    REPO_ROOT,
    FamilyYamlError,
    _check_type,
    _no_unknown,
    _require,
    _short,
    _string_list,
)

# -- page and claims (generator/facts/collect.py reads them) ------------------------------------------

PAGE_FIELDS = ("block_kinds", "vision", "config_fields", "vision_config_fields")
BLOCK_KIND_FIELDS = ("label", "mixer", "parts")
BLOCK_KIND_REQUIRED = ("label", "mixer")
VISION_PAGE_FIELDS = ("line", "chain", "facts", "parts")
VISION_PAGE_REQUIRED = ("line", "chain", "facts")
CHAIN_LINK_FIELDS = ("module", "value")
CLAIMS_FIELDS = ("identities", "values", "releases")
IDENTITY_FIELDS = ("kind", "expr", "load", "tolerance")
IDENTITY_REQUIRED = ("kind", "expr")
VALUE_CLAIM_FIELDS = ("layout", "read_at")

# -- sizes ---------------------------------------------------------------------------------------

#: the ceilings of a tiny checkpoint's config (and processor): it must stay tiny
TINY_LIMITS = {"vocab": 65_536, "positions": 65_536, "layers": 32, "experts": 64, "heads": 64, "size": 1024}
#: a rough ceiling of the tiny checkpoint's parameters (see :func:`tiny_parameters`)
TINY_MAX_PARAMETERS = 20_000_000
#: realistic ceilings of a full-size checkpoint's config (built on the meta device for the page)
FULL_LIMITS = {
    "vocab": 1_000_000,
    "positions": 16_777_216,
    "layers": 1000,
    "experts": 4096,
    "heads": 1024,
    "size": 131_072,
}


#: booleans whose names end like a size's: LFM2's (whether the MLP width is adjusted), RecurrentGemma's (whether
#: the embedding is scaled)
FLAGS_NAMED_LIKE_SIZES = ("block_auto_adjust_ff_dim", "embeddings_scale_by_sqrt_dim")
#: factors whose names end like a size's: YaRN's attention-scale exponent (DeepSeek-V2-Lite's 0.707)
FACTORS_NAMED_LIKE_SIZES = ("mscale_all_dim",)


def size_kind(name: str) -> str | None:
    """Which limit a config field is held to (None: not a size or a count)."""
    if name.endswith("_id") or name.endswith("_ids"):
        return None
    if name in FLAGS_NAMED_LIKE_SIZES or name in FACTORS_NAMED_LIKE_SIZES:
        return None
    if name.endswith("vocab_size"):
        return "vocab"
    if "position_embeddings" in name:
        return "positions"
    if name.endswith("_layers") or name == "depth":
        return "layers"
    if "experts" in name:
        return "experts"
    if name.endswith("_heads"):
        return "heads"
    if name.endswith(("_size", "_dim")) or name.startswith(("num_", "n_")):
        return "size"
    return None


def _zero_allowed(name: str) -> bool:
    """Counts that may be 0: no experts (a dense model), no multi-token-prediction layers."""
    return ("experts" in name or name.startswith("mtp_") or name == "num_nextn_predict_layers"
            or name == "max_window_layers")


def check_sizes(file: Path, config: Mapping, prefix: str, limits: dict[str, int], fix: str) -> None:
    """Every size or count in ``config`` (nested mappings included) is an int in 1..limit."""
    for name, value in config.items():
        dotted = f"{prefix}.{name}"
        if isinstance(value, Mapping):
            check_sizes(file, value, dotted, limits, fix)
            continue
        kind = size_kind(str(name))
        if kind is None or value is None:
            continue
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            where = dotted if index is None else f"{dotted}[{index}]"
            if isinstance(item, bool) or not isinstance(item, int):
                raise FamilyYamlError(file, where, f"expected a whole number (a size), got {_short(item)}")
            low = 0 if _zero_allowed(str(name)) else 1
            if item < low:
                raise FamilyYamlError(
                    file, where, f"must be {'0 or more' if low == 0 else 'a positive integer'}, got {item}"
                )
            if item > limits[kind]:
                raise FamilyYamlError(file, where, f"{item} exceeds the limit {limits[kind]:,} {fix}")


def _int(config: Mapping, *names: str, default: int = 0) -> int:
    for name in names:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return default


def tiny_parameters(config: Mapping) -> int:
    """A rough upper bound of a config's parameters: per mapping with a width, its blocks'
    attention (4 projections) and MLPs (3 projections per expert, shared expert included) and
    the embedding and head."""
    total = 0
    width = _int(config, "hidden_size", "embed_dim", "d_model")
    if width:
        layers = _int(config, "num_hidden_layers", "depth", "num_layers", default=1)
        heads = _int(config, "num_attention_heads", "num_heads", default=1)
        head_dim = _int(config, "head_dim", default=width // max(heads, 1))
        ratio = config.get("mlp_ratio")
        ratio = ratio if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) else 4
        inner = _int(config, "intermediate_size", default=int(ratio * width))
        experts = _int(config, "num_experts", "n_routed_experts")
        expert = _int(config, "moe_intermediate_size", default=inner)
        shared = _int(config, "shared_expert_intermediate_size")
        attention = 4 * width * max(width, heads * head_dim)
        mlp = 3 * width * (inner + experts * expert + shared)
        total += layers * (attention + mlp) + 2 * _int(config, "vocab_size") * width
    return total + sum(tiny_parameters(v) for v in config.values() if isinstance(v, Mapping))


def check_tiny_config(file: Path, tiny: Mapping) -> None:
    fix = "(a tiny checkpoint must stay tiny)"
    check_sizes(file, tiny["config"], "tiny.config", TINY_LIMITS, fix)
    if isinstance(tiny.get("processor"), Mapping):
        check_sizes(file, tiny["processor"], "tiny.processor", TINY_LIMITS, fix)
    check_recipe_runs(file, tiny)
    estimate = tiny_parameters(tiny["config"])
    if estimate > TINY_MAX_PARAMETERS:
        raise FamilyYamlError(
            file,
            "tiny.config",
            f"about {estimate:,} parameters, over the tiny limit {TINY_MAX_PARAMETERS:,}; "
            "make the widths, layers or experts smaller",
        )


def _token_ids(config: Mapping, prefix: str) -> dict[str, int]:
    out = {}
    for key, value in config.items():
        if isinstance(key, str) and key.endswith(("_token_id", "_token_index")):
            for token_id in value if isinstance(value, list) else [value]:
                if isinstance(token_id, int) and not isinstance(token_id, bool):
                    out[f"{prefix}{key}"] = max(out.get(f"{prefix}{key}", -1), token_id)
    return out


def check_recipe_runs(file: Path, tiny: Mapping) -> None:
    """What transformers accepts but a forward cannot run: a token id past the embedding, kv heads that do not
    divide the heads (``pin`` would write a pin for a checkpoint that fails its first trace)."""
    config = tiny["config"]
    text, where = (config["text_config"], "tiny.config.text_config.") if isinstance(config.get("text_config"),
                                                                                      Mapping) else (config, "tiny.config.")
    vocab = text.get("vocab_size", config.get("vocab_size"))
    if isinstance(vocab, int):
        specials = (tiny.get("tokenizer") or {}).get("special_tokens") or {}
        ids = {**_token_ids(config, "tiny.config."), **_token_ids(text, where),
               **{f"tiny.tokenizer.special_tokens.{token}": i for token, i in specials.items() if isinstance(i, int)}}
        for field, token_id in ids.items():
            if token_id >= vocab:
                raise FamilyYamlError(file, field, f"id {token_id} is past the embedding (vocab_size {vocab}); "
                                                   f"raise vocab_size above it or give the token a smaller id")
    heads, kv = text.get("num_attention_heads"), text.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv, int) and (kv <= 0 or heads % kv):
        raise FamilyYamlError(file, f"{where}num_key_value_heads", f"{kv} does not divide num_attention_heads "
                                                                   f"{heads}; pick a divisor of it")


def served_model_types(module: str) -> set[str] | None:
    """The module's ``MODEL_TYPES``, read from its source (no torch import: render-side commands load YAMLs too)."""
    import ast

    path = FAMILY_MODULES / f"{module.rsplit('.', 1)[-1]}.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MODEL_TYPES" for t in node.targets):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None


def check_model_types(file: Path, module: str, checkpoints: tuple[dict[str, Any], ...]) -> None:
    """A full-size config of another family (a bert config under llama) is named here, not by the first note
    that reads it."""
    served = served_model_types(module)
    if not served:
        return
    for i, item in enumerate(checkpoints):
        config = item.get("config")
        if not isinstance(config, Mapping):
            continue
        text = config.get("text_config") if isinstance(config.get("text_config"), Mapping) else {}
        types = {config.get("model_type"), text.get("model_type")} - {None}
        if types and not types & served:
            raise FamilyYamlError(file, f"checkpoints[{i}].config.model_type", f"{sorted(types)[0]!r} is not a model "
                                  f"type {module} serves ({', '.join(sorted(served))}); is it this family's config.json?")


def check_full_configs(file: Path, checkpoints: tuple[dict[str, Any], ...]) -> None:
    for i, item in enumerate(checkpoints):
        if "config" in item:
            check_sizes(
                file, item["config"], f"checkpoints[{i}].config", FULL_LIMITS, "(is it the checkpoint's config.json?)"
            )


# -- page and claims -------------------------------------------------------------------------------


def _mapping(file: Path, dotted: str, value: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict:
    _check_type(file, dotted, value, dict)
    _no_unknown(file, value, f"{dotted}.", allowed)  # first: a typo reads as one, not as a missing key
    _require(file, value, f"{dotted}.", required)
    return value


def _parts(file: Path, dotted: str, value: Any) -> None:
    _check_type(file, dotted, value, list)
    for n, pair in enumerate(value):
        if not (isinstance(pair, list) and len(pair) in (2, 3) and all(isinstance(s, str) for s in pair)
                and pair[2:] in ([], ["parallel"])):
            raise FamilyYamlError(
                file, f"{dotted}[{n}]", f"expected a [module, value] pair of strings (then 'parallel' for a part that "
                f"reads what the part before it reads), got {_short(pair)}"
            )


def check_page(file: Path, page: Any) -> None:
    if page is None:
        return
    _mapping(file, "page", page, PAGE_FIELDS)
    kinds = page.get("block_kinds")
    if kinds is not None:
        _check_type(file, "page.block_kinds", kinds, dict)
        for kind, spec in kinds.items():
            where = f"page.block_kinds.{kind}"
            _check_type(file, where, kind, str)
            _mapping(file, where, spec, BLOCK_KIND_FIELDS, BLOCK_KIND_REQUIRED)
            _check_type(file, f"{where}.label", spec["label"], str)
            _check_type(file, f"{where}.mixer", spec["mixer"], str)
            if "parts" in spec:
                _parts(file, f"{where}.parts", spec["parts"])
    vision = page.get("vision")
    if vision is not None:
        _mapping(file, "page.vision", vision, VISION_PAGE_FIELDS, VISION_PAGE_REQUIRED)
        _check_type(file, "page.vision.line", vision["line"], str)
        _check_type(file, "page.vision.chain", vision["chain"], list)
        for n, link in enumerate(vision["chain"]):
            where = f"page.vision.chain[{n}]"
            _mapping(file, where, link, CHAIN_LINK_FIELDS, ("module",))
            for key in CHAIN_LINK_FIELDS:
                if key in link:
                    _check_type(file, f"{where}.{key}", link[key], str)
        _check_type(file, "page.vision.facts", vision["facts"], dict)
        for key, text in vision["facts"].items():
            _check_type(file, f"page.vision.facts.{key}", key, str)
            _check_type(file, f"page.vision.facts.{key}", text, str)
        if "parts" in vision:
            _parts(file, "page.vision.parts", vision["parts"])
    for key in ("config_fields", "vision_config_fields"):
        if key in page:
            _string_list(file, f"page.{key}", page[key])


def check_claims(file: Path, claims: Any) -> None:
    if claims is None:
        return
    _mapping(file, "claims", claims, CLAIMS_FIELDS)
    identities = claims.get("identities")
    if identities is not None:
        _check_type(file, "claims.identities", identities, list)
        for n, claim in enumerate(identities):
            where = f"claims.identities[{n}]"
            _mapping(file, where, claim, IDENTITY_FIELDS, IDENTITY_REQUIRED)
            _check_type(file, f"{where}.kind", claim["kind"], str)
            expr = _check_type(file, f"{where}.expr", claim["expr"], str)
            if expr.count("==") != 1:
                raise FamilyYamlError(file, f"{where}.expr", f"expected 'a + b + ... == c', got {_short(expr)}")
            if "load" in claim:
                _check_type(file, f"{where}.load", claim["load"], str)
            if "tolerance" in claim:
                tolerance = _check_type(file, f"{where}.tolerance", claim["tolerance"], (int, float))
                if not (0 <= tolerance < float("inf")):  # inf (and nan) would pass any error: no claim at all
                    raise FamilyYamlError(file, f"{where}.tolerance", f"must be a finite number, 0 or more, got "
                                                                     f"{tolerance}; state the error the claim allows")
    values = claims.get("values")
    if values is not None:
        _value_claims(file, "claims.values", values)
    moved = claims.get("releases")
    if moved is not None:
        _release_claims(file, moved, values or {})


def _value_claims(file: Path, dotted: str, values: Any) -> None:
    """host -> value -> {layout, read_at}, every field a string."""
    _check_type(file, dotted, values, dict)
    for host, names in values.items():
        where = f"{dotted}.{host}"
        _check_type(file, where, host, str)
        _check_type(file, where, names, dict)
        for name, claim in names.items():
            _check_type(file, f"{where}.{name}", name, str)
            _mapping(file, f"{where}.{name}", claim, VALUE_CLAIM_FIELDS, VALUE_CLAIM_FIELDS)
            for key in VALUE_CLAIM_FIELDS:
                _check_type(file, f"{where}.{name}.{key}", claim[key], str)


def _release_claims(file: Path, moved: Any, values: dict) -> None:
    """``claims.releases``: a transformers version specifier -> the claims of ``claims.values`` that differ under
    the releases it names (a read point the release moved), each replacing the one ``claims.values`` makes."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    _check_type(file, "claims.releases", moved, dict)
    for spec, claims in moved.items():
        where = f"claims.releases.{spec}"
        _check_type(file, where, spec, str)
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise FamilyYamlError(file, where, f"{spec!r} is not a version specifier (e.g. '>=5.25')") from None
        _value_claims(file, where, claims)
        for host, names in claims.items():
            for name in names:
                if name not in values.get(host, {}):
                    raise FamilyYamlError(file, f"{where}.{host}.{name}", "claims.values makes no such claim: a "
                                          "release's claim replaces one of claims.values (the locked release's)")


# -- notes files and the family module ----------------------------------------------------------------

#: where a notes path may point, relative to the YAML's directory ("": beside the YAML)
NOTES_DIRECTORIES = {"notes": "", "vision_notes": "", "shared_vision_notes": "shared"}


def check_notes_path(file: Path, key: str, value: Any) -> None:
    """A notes path names a markdown file beside the YAML (``shared/`` for the shared vision notes).

    Whether the file exists is checked when the notes are built (generator/notes/notes_parse.py
    ``notes_source``): the commands that need only the recipe (pin, checkpoint) run on a copy of the
    YAML alone."""
    if value is None or (key == "notes" and isinstance(value, list)):
        return  # the default file, or notes inline (generator/notes/notes_parse.py checks them)
    kinds = "a path to a markdown file" + (" or a list of notes" if key == "notes" else "")
    if not isinstance(value, str):
        raise FamilyYamlError(file, key, f"expected {kinds} (relative to the YAML), got {_short(value)}")
    directory = NOTES_DIRECTORIES[key]
    example = {"notes": f"{file.stem}.notes.md", "vision_notes": f"{file.stem}.vision.md"}.get(key, "shared/<name>.md")
    path = PurePosixPath(value)
    if (
        "\\" in value
        or path.is_absolute()
        or ".." in path.parts
        or str(path.parent) != (directory or ".")
        or path.suffix != ".md"
    ):
        where = f"in {directory}/ beside the YAML" if directory else "beside the YAML"
        raise FamilyYamlError(file, key, f"{value!r} must name a .md file {where}, e.g. {example!r}")


FAMILY_MODULES = REPO_ROOT / "nncanon" / "families"
_MODULE = re.compile(r"^nncanon\.families\.(?P<name>[a-z][a-z0-9_]*)$")


def family_modules() -> list[str]:
    """The family modules: ``nncanon/families/<name>.py`` but the shared ``_`` ones."""
    return sorted(f"nncanon.families.{p.stem}" for p in FAMILY_MODULES.glob("*.py") if not p.stem.startswith("_"))


def check_module(file: Path, module: str) -> None:
    match = _MODULE.match(module)
    if not match or not (FAMILY_MODULES / f"{match['name']}.py").is_file():
        known = ", ".join(m.rsplit(".", 1)[1] for m in family_modules())
        raise FamilyYamlError(
            file, "module", f"{_short(module)} is not a family module: write nncanon.families.<name>, "
            f"one of {known} (or add nncanon/families/<name>.py)"
        )


def check_sections(file: Path, data: Mapping, tiny: Mapping, checkpoints: tuple[dict[str, Any], ...]) -> None:
    """What the YAML says beyond its structure, checked in one pass over the parsed file (``family.load_family``
    has checked each field's type, the tiny recipe's and the checkpoints' shape): the family module, the sizes,
    the model types, ``page``, ``claims`` and the notes' paths."""
    check_module(file, data["module"])
    check_tiny_config(file, tiny)
    check_full_configs(file, checkpoints)
    check_model_types(file, data["module"], checkpoints)
    check_page(file, data.get("page"))
    check_claims(file, data.get("claims"))
    for key in NOTES_DIRECTORIES:
        check_notes_path(file, key, data.get(key))
