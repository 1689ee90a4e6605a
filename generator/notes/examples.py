"""The notes of a family page: parse them, evaluate their claims, run their code.

A family's notes are markdown files named by its YAML (paths relative to the YAML)::

    notes: qwen3_5_moe_text.notes.md             # 03 · what to know before you run
    vision_notes: qwen3_5_moe_text.vision.md     # the family's own vision notes
    shared_vision_notes: shared/qwen_vit.md      # the vision encoder's notes, shared by families
    saes: {markdown: ..., releases: [...]}       # the Sparse autoencoders section

(``notes`` and ``vision_notes`` default to ``<family>.notes.md`` and ``<family>.vision.md`` beside
the YAML when those exist; ``notes`` may also be a list of ``{title, slug?, markdown}``.)

A notes file is one note per ``## Title`` heading, optionally ``## Title {#slug}``. It may start
with a YAML front matter block (``---`` lines) holding ``title`` and ``line`` (the shared vision
notes' heading and line name), ``variants`` (the title of a section whose prose goes under the
variants table instead of being a note) and ``let`` (names for expressions, below).

**Expressions.** ``{{ expr }}`` (on one line) is a Python expression evaluated at build time; the
page shows its value. It sees the full-size checkpoints of the YAML's ``checkpoints:``, named by id
or by the id's tail (``"35B-A3B"``: the id whose name ends in ``-35B-A3B``, the first one listed
when several do; ``"3.6-35B-A3B"`` also names ``Qwen/Qwen3.6-35B-A3B``):

- ``cfg(c)``: the checkpoint's transformers config; ``cfg(c).text`` and ``cfg(c).vision`` are its
  text and vision configs, ``text(c)`` and ``vision(c)`` the same;
- ``count(kind, c)`` / ``blocks(kind, c)``: how many / which blocks have ``layer_types`` == kind;
- ``meta(c)``: the full-size model built on the meta device (``generator.checkpoint.meta_models.meta_model``);
- ``token_id(token, c)``: a special token's id in the full-size tokenizer, from the config's
  ``eos_token_id`` (``<|endoftext|>``) and the order of the family's special tokens (the tiny
  tokenizer's), checked against every token id the config gives (image, video, vision start/end);
- ``ids()``: the checkpoint ids; ``tiny``: the tiny checkpoint's config (``tiny.text``, ``tiny.vision``);
- ``needing(words, host=None)``: the value names whose load condition mentions ``words``, on the
  tiny checkpoint's ``support()`` (hosts whose path contains ``host``);
- ``version(package)``: an installed package's version (``version("transformers")``);
- formatting: ``code(x)`` (`` `x` ``, a list joined "a, b and c"), ``join(xs)``, ``sci(1e7)`` (10⁷),
  ``mib(n)`` (bytes to MiB);
- the front matter's ``let`` names, each an expression over the above (lambdas are fine).

Forms: ``{{ expr }}`` shows the value (a bool is refused: a claim must say what it claims);
``{{ 30 == expr }}`` is a *checked literal*: it shows ``30`` and the build fails unless
``expr == 30`` (the literal side is shown as typed, so a reader sees the number in the source);
``{{ assert expr }}`` shows nothing and fails the build unless ``expr`` is true.

**Code.** Every ```` ```python ```` block runs at build time against the tiny checkpoint, the blocks of
one note in order in one namespace, with ``model`` (``nncanon.load(checkpoint,
task="image-text-to-text")``; the default text-generation load for a family with no image
processor), ``checkpoint``, ``prompt`` (a user message through the tokenizer's chat template,
``enable_thinking=False``; in the vision notes the message holds the two images), ``red`` and
``wide`` (PIL images whose patch grids divide into the 2 x 2 merge blocks; vision-language
families only), ``torch`` and ``nncanon``. Its ``assert`` statements and its lines ending in ``# True`` (an expression that
must be truthy) are the claims. A ```` ```python display ```` block is shown, not run. Expressions in
code are substituted before it runs; the page shows the code as written, expressions substituted.

Notes are code: the build runs them, so review them as code. Each note (its expressions and code)
runs under a time limit, ``$NNCANON_NOTE_TIMEOUT`` seconds (120 by default, 0 for none), and code
that exits (``sys.exit``) fails the build like a failing claim.

A failing claim raises :class:`NoteError` (one line) naming the family, the note, the file and line, and the
claim. :func:`build_notes` returns the ``notes``, ``vision_notes`` and ``saes`` parts of the facts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from generator.notes.expressions import (  # noqa: F401 - re-exported: generator.notes.examples is the notes' API
    ClaimFailed,
    ConfigView,
    ExpressionContext,
    code,
    evaluate,
    fmt,
    join,
    mib,
    render_expressions,
    sci,
    version,
)
from generator.notes.note_runner import Block, NoteRunner, _describe, instrument  # noqa: F401 - re-exported
from generator.notes.notes_parse import (  # noqa: F401 - re-exported
    Note,
    NoteError,
    _inline_notes,
    _notes_source,
    _yaml_line,
    parse_notes,
    slugify,
)
from generator.notes.sae_check import RELEASE_FIELDS, ROW_FIELDS, _releases, verify_releases, verify_sae  # noqa: F401 - re-exported
from generator.recipe.family import Family
from generator.recipe.fields import FamilyYamlError, _display

__all__ = ["NoteError", "Note", "build_notes", "parse_notes", "ExpressionContext", "render_expressions"]

#: the text of the user message ``prompt`` holds, and the vision notes' message around two images
PROMPT_TEXT = "The cat sat on the mat because it was warm."
VISION_PROMPT_TEXT = "Which of the two images is wider?"


# ---------------------------------------------------------------------------------------------
# the prompts and images the code uses


def chat_prompt(tokenizer: Any, images: int = 0) -> str:
    """A user message through the tokenizer's chat template, thinking off; ``images`` image parts first. A tokenizer
    with no chat template (an encoder's: BERT's WordPiece) gets the message's text itself."""
    if not images and getattr(tokenizer, "chat_template", None) is None:
        return PROMPT_TEXT
    if images:
        content: Any = [{"type": "image"} for _ in range(images)] + [
            {"type": "text", "text": VISION_PROMPT_TEXT}
        ]
    else:
        content = PROMPT_TEXT
    messages = [{"role": "user", "content": content}]
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )


def example_images(processor: Any) -> dict[str, Any]:
    """``red``: a red square; ``wide``: a wide image of another size (left blue, right green).

    Both sides are multiples of patch_size * merge_size, so the processor keeps them as they are
    and every grid divides into the merger's blocks; checked against the processor's grids.
    """
    from PIL import Image

    image_processor = processor.image_processor
    if not hasattr(image_processor, "merge_size"):
        # a processor that resizes and crops every image to the tower's one size (CLIP's, llava): two sizes serve
        red = Image.new("RGB", (32, 32), (220, 30, 30))
        wide = Image.new("RGB", (64, 32), (30, 60, 200))
        wide.paste(Image.new("RGB", (32, 32), (40, 180, 70)), (32, 0))
        return {"red": red, "wide": wide}
    unit = image_processor.patch_size * image_processor.merge_size
    red = Image.new("RGB", (2 * unit, 2 * unit), (220, 30, 30))
    wide = Image.new("RGB", (4 * unit, 2 * unit), (30, 60, 200))
    wide.paste(Image.new("RGB", (2 * unit, 2 * unit), (40, 180, 70)), (2 * unit, 0))
    grids = image_processor(images=[red, wide], return_tensors="pt")["image_grid_thw"].tolist()
    merge = image_processor.merge_size
    expected = [[1, 2 * merge, 2 * merge], [1, 2 * merge, 4 * merge]]
    if grids != expected:
        raise RuntimeError(
            f"the example images' patch grids are {grids}, expected {expected}: the processor "
            "resized them; make them multiples of patch_size * merge_size within its pixel bounds"
        )
    return {"red": red, "wide": wide}


# ---------------------------------------------------------------------------------------------
# the whole


def build_notes(
    family: Family,
    tiny_checkpoint_dir: str | Path,
    *,
    model: Any = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Render, check and run a family's notes, vision notes and SAE section.

    Returns ``{"notes": [...], "vision_notes": {...} | None, "saes": {...} | None}`` in the facts
    JSON's shapes (``vision_notes.shared.variants`` holds only the variants' prose, under
    ``markdown``, when the shared notes have one). ``model``: an ``image-text-to-text`` load of
    ``tiny_checkpoint_dir`` to reuse (loaded here when None). Raises `NoteError` on the first claim
    that does not hold.
    """
    import torch

    # The tiny model's ops are too small to share among threads: one thread is faster, and far
    # faster on a busy machine, where a team of threads waits on its slowest member at every op.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _build_notes(family, tiny_checkpoint_dir, model, log)
    finally:
        torch.set_num_threads(threads)


def _build_notes(
    family: Family,
    tiny_checkpoint_dir: str | Path,
    model: Any,
    log: Callable[[str], None] | None,
) -> dict[str, Any]:
    import torch

    import nncanon

    fam = family
    checkpoint = Path(tiny_checkpoint_dir)
    say = log or (lambda message: None)
    sources = {
        "notes": _notes_source(fam, "notes", f"{fam.family}.notes.md"),
        "vision": _notes_source(fam, "vision_notes", f"{fam.family}.vision.md"),
        "shared": _notes_source(fam, "shared_vision_notes", None),
    }
    if model is None:
        task = "image-text-to-text" if "processor" in fam.tiny else "text-generation"
        say(f"loading the tiny checkpoint ({task})")
        model = nncanon.load(checkpoint, task=task)
    processor = getattr(model, "processor", None)
    if processor is None and "processor" in fam.tiny:
        raise ValueError(
            "build_notes needs the image-text-to-text load of the tiny checkpoint (model.processor)"
        )
    support = list(model.support())
    context = ExpressionContext(fam, model._module.config, support)
    text_prompt = chat_prompt(model.tokenizer)
    images = example_images(processor) if processor is not None else {}  # text-only families: no images
    base = {
        "model": model,
        "checkpoint": checkpoint,
        "prompt": text_prompt,
        "torch": torch,
        "nncanon": nncanon,
        **images,
    }
    runner = NoteRunner(fam, context, base, log)

    def run_file(
        source: Path | list | None, extra: dict[str, Any] | None = None
    ) -> tuple[dict, list[dict], str | None]:
        if source is None:
            return {}, [], None
        if isinstance(source, list):
            front, notes = {}, _inline_notes(fam, source)
        else:
            front, notes = parse_notes(source, fam.family)
        try:
            names = context.namespace(
                front.get("let"), _display(source) if isinstance(source, Path) else "notes"
            )
        except ClaimFailed as error:
            raise NoteError(
                fam.family, None, source if isinstance(source, Path) else fam.path, 1, str(error)
            ) from None
        variants_title = front.get("variants")
        out, variants = [], None
        for note in notes:
            say(f"note: {note.title}")
            lines = runner.check(note, names, extra)
            if variants_title and note.title == variants_title:
                variants = "\n".join(lines)
                continue
            out.append({"title": note.title, "slug": note.slug, "markdown": "\n".join(lines)})
        if variants_title and variants is None:
            raise NoteError(
                fam.family, None, source, 1, f"the front matter's variants: {variants_title!r} names no note"
            )
        for key in ("title", "line"):
            if key in front:
                front[key] = render_expressions(
                    str(front[key]),
                    names,
                    lambda c, claim, why: NoteError(fam.family, None, source, 1, why, claim),
                )
        return front, out, variants

    _, notes, _ = run_file(sources["notes"])
    vision_notes = None
    if sources["vision"] is not None or sources["shared"] is not None:
        vision_extra = {"prompt": chat_prompt(model.tokenizer, images=2)}
        shared = None
        if sources["shared"] is not None:
            front, shared_notes, variants = run_file(sources["shared"], vision_extra)
            for key in ("title", "line"):
                if key not in front:
                    raise NoteError(
                        fam.family,
                        None,
                        sources["shared"],
                        1,
                        f"the shared vision notes' front matter needs '{key}'",
                    )
            shared = {"title": front["title"], "line": front["line"], "notes": shared_notes}
            if variants:
                shared["variants"] = {"markdown": variants}
        own = None
        if sources["vision"] is not None:
            front, own_notes, _ = run_file(sources["vision"], vision_extra)
            own = {"title": front.get("title", fam.lines[0]), "notes": own_notes}
        vision_notes = {"shared": shared, "family": own}

    saes = None
    if fam.saes is not None:
        if not isinstance(fam.saes, dict):
            raise FamilyYamlError(
                fam.path, "saes", f"expected a mapping with markdown and releases, got {fam.saes!r}"
            )
        unknown = sorted(set(fam.saes) - {"markdown", "releases"})
        if unknown:
            raise FamilyYamlError(
                fam.path, f"saes.{unknown[0]}", "unknown field (allowed: markdown, releases)"
            )
        say("sparse autoencoders")
        releases = _releases(fam, context, support)
        markdown = fam.saes.get("markdown", "")
        if not isinstance(markdown, str):
            raise FamilyYamlError(fam.path, "saes.markdown", f"expected markdown text, got {markdown!r}")
        yaml_text = Path(fam.path).read_text(encoding="utf-8").splitlines()
        first = _yaml_line(yaml_text, markdown) or 0
        note = Note(
            "Sparse autoencoders",
            "sparse-autoencoders",
            Path(fam.path),
            first,
            [(first + n if first else 0, line) for n, line in enumerate(markdown.splitlines())],
        )
        with tempfile.TemporaryDirectory(prefix="nncanon-sae-") as tmp:
            directory = Path(tmp)
            try:
                verified = verify_releases(model, text_prompt, releases, directory, context)
            except Exception as error:  # noqa: BLE001 - reported as the section's failure
                raise NoteError(
                    fam.family, note.title, fam.path, first, f"the SAE check fails: {_describe(error)}"
                ) from error
            lines = runner.check(note, context.namespace(), {"directory": directory})
        saes = {
            "markdown": "\n".join(lines),
            "releases": [{k: r[k] for k in ROW_FIELDS} for r in releases],
            "verified": verified,
        }
        if any(r.get("kind") == "jumprelu" for r in releases):
            saes["sparsity"] = "L0"  # the table's sparsity column: JumpReLU releases name L0 targets, not k
    return {"notes": notes, "vision_notes": vision_notes, "saes": saes}
