"""Tiny pinned checkpoints: build one from its family's recipe, cache it, check its pin.

The family YAML's ``tiny:`` section is a recipe: a model class, a seed, a small config, the
tokenizer (:mod:`generator.checkpoint.tiny_tokenizer`), the image processor's settings (vision-language
families only), and ``sha256``, the pin of every file the checkpoint holds. :func:`checkpoint_dir`
builds the checkpoint from the recipe (or reuses the cached build) and returns its directory, laid
out as a user's checkpoint is and loaded back through the same ``from_pretrained`` calls::

    <cache>/<family>-<key>/
        config.json  generation_config.json  model.safetensors       the model (float32)
        tokenizer.json  tokenizer_config.json  chat_template.jinja    the tokenizer
        processor_config.json                                         image processor + processor (if any)
        nncanon_checkpoint.json                                       the manifest: what was built, each file's sha256

``<cache>`` is ``$NNCANON_CACHE`` or ``<repo>/build/checkpoints``; ``<key>`` hashes the recipe
(without its pin), the tokenizer corpus and chat template, the builder and the torch and
transformers versions, so a change to any of them builds a new directory. A build happens in a
temporary directory beside the cache entry and is renamed into place only when complete and pinned.

The pin is the sha256 of the file list (``sha256sum`` lines of every file but the manifest, sorted
by name), so a change to any file (weights, config, tokenizer, processor) fails it. A JSON file is
hashed without its ``"transformers_version"`` line (`content_sha256`): config.json and
generation_config.json record the release that wrote them, and nothing else in the checkpoint
depends on it (5.12 to 5.24 write byte-identical weights and tokenizers), so a pin holds under every
release that writes the same content, and a release that writes different content still fails it; so are the
lines of config keys the recipe says a release derives from the others (``tiny.derived_config_keys``, checked to be
derived: `generator.checkpoint.derived_keys`). The weights
are a pure function of the recipe (:mod:`generator.checkpoint.tiny_weights`), so a pin reproduces on every
CPU; a cached entry whose files no longer match its manifest is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from generator.checkpoint import derived_keys, tiny_weights
from generator.checkpoint.tiny_tokenizer import (
    build_processor,
    build_tokenizer,
    tokenizer_kind,
    transformers_class,
)
from generator.disk import CACHE, room
from generator.kernel_log import recording
from generator.recipe.family import Family
from generator.recipe.fields import REPO_ROOT, FamilyYamlError, _display
from generator.recipe.tokenizer_presets import CORPUS

BUILDER_VERSION = 2
WEIGHTS_FILE = "model.safetensors"
MANIFEST_FILE = "nncanon_checkpoint.json"
CONSTANT_PARAM_NOISE = tiny_weights.CONSTANT_PARAM_NOISE


def cpu_capability() -> str:
    """The kernels torch runs here (``ATEN_CPU_CAPABILITY`` or what the CPU supports)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


class PinMismatch(RuntimeError):
    """The built checkpoint's digest differs from the family YAML's ``tiny.sha256`` (or it is null)."""

    def __init__(self, family: str, file: str | Path, expected: str | None, actual: str,
                 files: dict[str, str] | None = None, capability: str | None = None):
        self.family = family
        self.file = _display(file)
        self.expected = expected
        self.actual = actual
        self.files = files or {}
        self.capability = capability
        repin = f"python -m generator pin {family}"
        built = f"built under CPU capability {capability}" if capability else "built"
        listing = "; ".join(f"{name} {sha[:12]}" for name, sha in sorted(self.files.items()))
        if expected is None:
            message = (
                f"{family}: {self.file} has no pin for the tiny checkpoint (tiny.sha256 is null); "
                f"the checkpoint {built} has sha256 {actual}. Pin it with: {repin}"
            )
        else:
            message = (
                f"{family}: the tiny checkpoint {built} has sha256 {actual} ({listing}), but "
                f"{self.file} pins tiny.sha256 {expected}. A pin must reproduce on every CPU "
                f"(ATEN_CPU_CAPABILITY=default and the native one); if the recipe, the builder or the "
                f"torch/transformers versions changed on purpose, re-pin with: {repin}; to rebuild a "
                f"cached entry from scratch: python -m generator checkpoint {family} --rebuild"
            )
        super().__init__(message)


# ---------------------------------------------------------------------------------------
# cache layout


def cache_root() -> Path:
    """``$NNCANON_CACHE`` or ``<repo>/build/checkpoints``."""
    env = os.environ.get("NNCANON_CACHE")
    root = Path(env) if env else REPO_ROOT / "build" / "checkpoints"
    if root.exists() and not root.is_dir():  # else mkdir's bare "[Errno 17] File exists"
        from generator.ownership import NotOurDirectory

        raise NotOurDirectory(f"NNCANON_CACHE={root}: it is a file, not a directory; set it to a directory")
    return root


def recipe_key(fam: Family) -> str:
    """A short hash of everything the checkpoint's files depend on (the pin excluded).

    Reads the torch and transformers versions from the installed distributions, so finding a
    cached build imports neither."""
    from importlib.metadata import version

    payload = {
        "recipe": fam.tiny_recipe,
        "builder": BUILDER_VERSION,
        "corpus": hashlib.sha256(CORPUS.encode()).hexdigest(),
        "chat_template": hashlib.sha256(tokenizer_kind(fam).template.encode()).hexdigest(),
        "noise": CONSTANT_PARAM_NOISE,
        "init_rules": tiny_weights.VECTOR_RULES,
        "torch": version("torch"),
        "transformers": version("transformers"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def cached_dir(fam: Family) -> Path:
    """Where the family's tiny checkpoint lives in the cache (it may not be built yet)."""
    return cache_root() / f"{fam.family}-{recipe_key(fam)}"


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: the one line save_pretrained writes naming the release (indent=2, sorted keys: never the only key)
_VERSION_LINE = re.compile(rb'^[ \t]*"transformers_version":[ \t]*"[^"\r\n]*",?[ \t]*\r?\n', re.MULTILINE)


def content_sha256(path: str | Path, derived: tuple[str, ...] = ()) -> str:
    """``path``'s sha256, a JSON file's without its ``"transformers_version"`` line and the top-level lines of
    ``derived``, config keys a release derives from the others (`generator.checkpoint.derived_keys`; every other
    byte counts)."""
    path = Path(path)
    if path.suffix != ".json":
        return file_sha256(path)
    data, found = _VERSION_LINE.subn(b"", path.read_bytes())
    return hashlib.sha256(derived_keys.without(data, derived)).hexdigest() if found == 1 else file_sha256(path)


# ---------------------------------------------------------------------------------------
# building


def build_model(fam: Family):
    """The tiny model exactly as the checkpoint saves it: float32, every parameter drawn by
    :func:`generator.checkpoint.tiny_weights.fill` from ``tiny.seed`` (the same bits on every CPU)."""
    import torch

    tiny = fam.tiny
    model_cls = transformers_class(fam, tiny["class"], "tiny.class")
    _check_class_is_the_familys(fam, model_cls)
    torch.manual_seed(tiny["seed"])  # the init only decides which vectors are constant, and at what
    try:
        config = _config_class(fam, model_cls)(**json.loads(json.dumps(tiny["config"])))
        _check_token_ids(fam, config)
        with _default_dtype(torch.float32):
            model = model_cls(config)
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError, AssertionError) as e:
        if isinstance(e, FamilyYamlError):
            raise
        raise FamilyYamlError(fam.path, "tiny.config", f"{model_cls.__name__} cannot be built from it: "
                                                       f"{type(e).__name__}: {e}") from None
    model = model.to(torch.float32).eval()
    try:
        tiny_weights.fill(model, tiny["seed"])
    except tiny_weights.InitRuleMissing as e:
        raise FamilyYamlError(fam.path, "tiny.class", str(e)) from None
    bad = []
    for name, param in model.named_parameters():
        param = param.detach()
        if not bool(torch.isfinite(param).all()):
            bad.append(f"{name} has non-finite values")
        elif param.numel() > 1 and float(param.std()) == 0.0:
            bad.append(f"{name} is constant")
    if bad:
        raise RuntimeError(
            f"{fam.family}: the tiny model's weights are not all random and finite: {'; '.join(bad)}"
        )
    return model


def _check_token_ids(fam: Family, config) -> None:
    """A special token id outside the tiny vocabulary (often the config class's default, for a vocabulary shrunk
    tiny) fails torch's embedding with a bare assertion: name the field and the fix instead."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None)
    if not isinstance(vocab, int):
        return
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(text, key, None)
        for token in value if isinstance(value, list | tuple) else [value]:
            if isinstance(token, int) and not 0 <= token < vocab:
                given = "" if key in fam.tiny["config"] else f" ({type(config).__name__}'s default)"
                raise FamilyYamlError(fam.path, f"tiny.config.{key}", f"{token}{given} is outside the tiny vocabulary "
                                      f"(vocab_size {vocab}); set tiny.config.{key} to an id below {vocab} (or null), or "
                                      "make vocab_size large enough to hold it")


def _config_class(fam: Family, model_cls: type, model_type: str | None = None) -> type:
    """The config class ``model_cls`` is built from: a model type's own where transformers builds that model
    type with another model's class (internlm3's InternLM3Config for LlamaForCausalLM), else the class's."""
    import importlib

    from nncanon.parts.loading import borrowed_config_class

    types = [model_type] if model_type else getattr(importlib.import_module(fam.module), "MODEL_TYPES", ())
    borrowed = (borrowed_config_class(model_cls, t) for t in types)
    return next((c for c in borrowed if c is not None), model_cls.config_class)


def _check_class_is_the_familys(fam: Family, model_cls: type) -> None:
    """A tiny.class of another family (GPT2LMHeadModel under llama) builds and pins, and then pages the wrong model."""
    import importlib

    served = getattr(importlib.import_module(fam.module), "MODEL_TYPES", None)
    config_class = getattr(model_cls, "config_class", None)
    model_type = getattr(_config_class(fam, model_cls), "model_type", None)
    text = (getattr(config_class, "sub_configs", None) or {}).get("text_config")  # a multimodal class: its text's
    if served and model_type and model_type not in served and getattr(text, "model_type", None) not in served:
        raise FamilyYamlError(fam.path, "tiny.class", f"{model_cls.__name__} is a {model_type!r} model, but {fam.module} "
                                                      f"serves {', '.join(sorted(served))}; name one of its classes")


@contextlib.contextmanager
def _default_dtype(dtype):
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


@contextlib.contextmanager
def _no_progress_bars():
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def checkpoint_files(directory: Path, derived: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file of a checkpoint directory but its manifest: relative name -> sha256 (`content_sha256`, config.json
    without the lines of ``derived``, the keys the recipe says a release derives)."""
    return {
        path.relative_to(directory).as_posix(): content_sha256(path, derived if path.name == "config.json" else ())
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }


def files_digest(files: dict[str, str]) -> str:
    """The pin of a checkpoint: sha256 of its ``sha256sum`` lines, sorted by file name."""
    lines = "".join(f"{sha}  {name}\n" for name, sha in sorted(files.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def _build_into(fam: Family, directory: Path) -> tuple[str, dict[str, str]]:
    """Write the whole checkpoint into ``directory``; return its digest and its files' sha256."""
    import torch
    import transformers

    started = time.perf_counter()
    with recording() as ran:  # which kernels the capability comparison must build under (tests/kernel_shards.py)
        model = build_model(fam)
        with _no_progress_bars():
            model.save_pretrained(directory)
        derived_keys.check(fam, type(model.config), directory)
        tokenizer = build_tokenizer(fam)
        tokenizer.save_pretrained(directory)
        if "processor" in fam.tiny:  # a vision-language family
            build_processor(fam, tokenizer).save_pretrained(directory)
        if "feature_extractor" in fam.tiny:  # a speech family: its log-mel features (generator/checkpoint/speech.py)
            from generator.checkpoint.speech import whisper_feature_extractor

            whisper_feature_extractor(fam).save_pretrained(directory)
    files = checkpoint_files(directory, derived_keys.listed(fam))
    digest = files_digest(files)
    manifest = {
        "family": fam.family,
        "key": recipe_key(fam),
        "sha256": digest,
        "files": files,
        "parameters": sum(p.numel() for p in model.parameters()),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu_capability": cpu_capability(),
        "build_seconds": round(time.perf_counter() - started, 2),
        "kernels": sorted(ran),
    }
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return digest, files


def _temp_build(fam: Family) -> tuple[Path, str, dict[str, str]]:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{fam.family}-", dir=root))
    try:
        with room(root, CACHE):
            digest, files = _build_into(fam, tmp)
        _usual_permissions(tmp)
        return tmp, digest, files
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _usual_permissions(directory: Path) -> None:
    """mkdtemp makes a private directory and some writers private files: give the checkpoint
    the permissions a directory made by mkdir and files made by open would have."""
    umask = os.umask(0)
    os.umask(umask)
    for path in [directory, *directory.rglob("*")]:
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~umask)


def _install(tmp: Path, final: Path) -> Path:
    """Rename a finished build into place, replacing an older build of the same key."""
    if final.exists():
        trash = final.with_name(f".old-{final.name}-{os.getpid()}-{time.monotonic_ns()}")
        with contextlib.suppress(FileNotFoundError):
            os.rename(final, trash)
        shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(tmp, final)
    except OSError:
        # Another process installed the same build meanwhile: keep theirs.
        if not (final / MANIFEST_FILE).is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _cached_matches(directory: Path, expected: str | None, derived: tuple[str, ...] = ()) -> bool:
    """The cached entry is complete, its files are the ones its manifest lists, and they are the pin."""
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if expected is None or manifest.get("sha256") != expected:
        return False
    files = checkpoint_files(directory, derived)
    return files == manifest.get("files") and files_digest(files) == expected


def checkpoint_dir(fam: Family, rebuild: bool = False) -> Path:
    """The directory of the family's tiny checkpoint, built if needed and checked against its pin.

    ``family`` is a family name, a YAML path or a :class:`Family`. A cached entry whose files do not
    match (edited, truncated, half-deleted) is rebuilt. Raises :class:`PinMismatch` when the
    build's digest differs from ``tiny.sha256`` or that is null.
    """
    expected = fam.tiny["sha256"]
    final = cached_dir(fam)
    if not rebuild and _cached_matches(final, expected, derived_keys.listed(fam)):
        return final
    tmp, actual, files = _temp_build(fam)
    if actual != expected:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PinMismatch(fam.base or fam.family, fam.path, expected, actual, files, cpu_capability())
    if not rebuild and _cached_matches(final, expected, derived_keys.listed(fam)):
        # another process (a parallel test worker, a second build) installed the pin meanwhile and may be
        # reading it: keep it rather than swap it away under the reader
        shutil.rmtree(tmp, ignore_errors=True)
        return final
    return _install(tmp, final)


# ---------------------------------------------------------------------------------------
# pinning

_SHA_LINE = re.compile(
    r"^(?P<head>[ \t]+sha256:[ \t]*)(?P<value>[^#\r\n]*?)(?P<tail>[ \t]*(?:#[^\r\n]*)?)(?P<eol>\r?\n?)$"
)
_TOP_KEY = re.compile(r"^[^\s#]")


def _rewrite_pin(path: Path, sha: str) -> None:
    """Replace the value of ``tiny.sha256`` in place, leaving every other byte as it was."""
    import yaml

    text = path.read_bytes().decode("utf-8")
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if re.match(r"^tiny:[ \t]*(#.*)?\r?\n?$", line)]
    if len(starts) != 1:
        raise FamilyYamlError(path, "tiny", "cannot find the one top-level 'tiny:' line to pin under")
    start = starts[0]
    end = next((i for i in range(start + 1, len(lines)) if _TOP_KEY.match(lines[i])), len(lines))
    child_indent = next(
        (
            re.match(r"^[ \t]*", lines[i]).group(0)
            for i in range(start + 1, end)
            if lines[i].strip() and not lines[i].lstrip().startswith("#")
        ),
        None,
    )
    hits = [
        i
        for i in range(start + 1, end)
        if child_indent and lines[i].startswith(child_indent + "sha256:") and _SHA_LINE.match(lines[i])
    ]
    if len(hits) != 1:
        raise FamilyYamlError(
            path,
            "tiny.sha256",
            "cannot find the one 'sha256:' line of the tiny section to rewrite (write it as 'sha256: null')",
        )
    m = _SHA_LINE.match(lines[hits[0]])
    value = sha if isinstance(yaml.safe_load(sha), str) else f'"{sha}"'  # an all-digit hash would be an int
    lines[hits[0]] = f"{m['head']}{value}{m['tail']}{m['eol']}"
    new_text = "".join(lines)

    before, after = yaml.safe_load(text), yaml.safe_load(new_text)
    before["tiny"]["sha256"] = sha
    if after != before:
        raise FamilyYamlError(path, "tiny.sha256", "rewriting the sha256 line would change more than the pin")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(new_text.encode("utf-8"))
    os.replace(tmp, path)


def pin(fam: Family) -> str:
    """Rebuild the tiny checkpoint, write its digest into the YAML's ``tiny.sha256``
    (only that line changes), install the build in the cache, and return the sha256."""
    tmp, sha, _ = _temp_build(fam)
    try:
        if fam.tiny["sha256"] != sha:
            _rewrite_pin(fam.path, sha)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _install(tmp, cached_dir(fam))
    for index, spec in enumerate(fam.variants):  # each variant's recipe, pinned in its own entry
        variant = fam.variant(spec["name"])
        tmp, variant_sha, _ = _temp_build(variant)
        try:
            if spec["sha256"] != variant_sha:
                from generator.recipe.variants import rewrite_variant_pin

                rewrite_variant_pin(fam.path, index, variant_sha)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _install(tmp, cached_dir(variant))
    return sha
