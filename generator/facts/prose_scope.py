"""Which sentences of a family's notes are claims about its own blocks, and which describe something else.

Notes describe more than the family's text blocks: another family they compare with ("Llama's block"), the vision
tower and its projector ("linear_1, GELU, linear_2"), an attention backend ("PyTorch's sdpa has no softcap"). Every
tag phrase applied to every sentence refused about 15 true ones (issue 48). So each sentence is scoped to what it
describes: one naming another family (by its lines or group, as its YAML spells them) or a backend is no claim about
this family and is left alone; one about the vision tower (or any sentence of the vision notes) is held to what the
build measured of it, its blocks' norm kind, where it speaks of the encoder's blocks and not of what joins them to the
text model (a projector, a merger, a perceiver: nothing measured); the rest are held to every phrase, as the
tagline is.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

#: a notes file's front matter (its ``let:`` definitions are code, not prose)
_FRONT = re.compile(r"\A---\n.*?\n---\n", re.S)
#: a backend or kernel a sentence may describe instead of the model
_BACKEND = re.compile(r"\b(?:sdpa|flash[_ -]?attention\w*|flex[_ ]attention|eager attention|PyTorch|CUDA|Triton|"
                      r"kernels?)\b", re.I)
#: the vision tower and what joins it to the text model
_VISION = re.compile(r"\b(?:vision|visual|ViT|images?|patch(?:es)?|projector|merger|pixels?|SigLIP|CLIP)\b", re.I)
#: what joins the vision encoder to the text model, whose norms the build does not measure: a sentence about it is no
#: claim about the encoder's blocks (Gemma 3's image tokens "each RMS-normed", Idefics2's perceiver's "final RMSNorm")
_CONNECTOR = re.compile(r"\b(?:projector|merger|perceiver|connector|resampler|image tokens?|pool\w*|final|"
                        r"post_layernorm|ln_q)\b", re.I)
_ENCODER_BLOCKS = re.compile(r"\b(?:blocks?|layers?)\b", re.I)


def prose(text: str) -> str:
    """A notes file's prose: no front matter, code blocks or ``{{ }}`` expressions."""
    text = _FRONT.sub("", text)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.sub(r"\{\{.*?\}\}", "", text, flags=re.S)


def sentences(text: str) -> list[str]:
    """The sentences of markdown prose: a heading, a list item or a table row is one of its own; paragraphs split at
    a sentence's end."""
    blocks, current = [], []
    for line in text.splitlines():
        starts = re.match(r"\s*(?:#{1,6}\s|[-*+]\s|\d+\.\s|\|)", line)
        if not line.strip() or starts:
            blocks.append(" ".join(current))
            current = []
        if starts:
            blocks.append(line.strip())
        elif line.strip():
            current.append(line.strip())
    blocks.append(" ".join(current))
    return [s.strip() for block in blocks for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`(\"“])", block) if s.strip()]


@functools.lru_cache(maxsize=8)
def _names(directory: Path) -> dict[str, frozenset[str]]:
    """Each family's names as its YAML spells them (its lines and group), by family, read from the directory."""
    names = {}
    for path in sorted(directory.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        lines = re.search(r"^lines:\s*\[(.*?)\]", text, re.M | re.S)
        group = re.search(r"^group:\s*(.+)$", text, re.M)
        found = {n.strip().strip("'\"") for n in (lines[1].split(",") if lines else [])}
        if group and group[1].strip()[:1].isupper():  # a model's group, not a kind ("Vision-language")
            found.add(group[1].strip().strip("'\""))
        names[path.stem] = frozenset(n for n in found if n and "vision-language" not in n.lower())
    return names


def others_named(family_name: str, directory: Path, sentence: str) -> list[str]:
    """The names of other families the sentence says (none its own family also goes by): the families beside its
    YAML and the build's (a family's YAML copied alone still knows the others)."""
    from generator.recipe.family import families_dir

    names = {**_names(families_dir()), **_names(directory)}
    own = names.get(family_name, frozenset())
    said = []
    for other, theirs in names.items():
        for name in theirs - own:
            if other != family_name and re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\d)", sentence):
                said.append(name)
    return said


def scope(family_name: str, directory: Path, field: str, sentence: str) -> str | None:
    """"text" (a claim about the family's blocks), "vision" (about its vision encoder's blocks) or None (about another
    family, a backend or the vision connector: nothing measured to hold it to)."""
    if _BACKEND.search(sentence) or others_named(family_name, directory, sentence):
        return None
    if field.endswith(".vision.md") or _VISION.search(sentence):
        # held to the encoder blocks' measured norms where it speaks of those blocks, else to nothing measured
        return "vision" if _ENCODER_BLOCKS.search(sentence) and not _CONNECTOR.search(sentence) else None
    return "text"
