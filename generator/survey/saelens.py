"""SAELens's pretrained SAE releases, kept as data for the SAE index (generator/site/sae_index.py).

``python -m generator.survey.saelens WHEEL`` reads ``sae_lens/pretrained_saes.yaml`` out of a sae-lens wheel
(``pip download sae-lens --no-deps``: the package's own list of every release it loads, with the model each was
trained on) and writes ``generator/survey/saelens_releases.json``: per release its model, the checkpoint that model
is on the hub (TransformerLens's aliases resolved: SAELens names models as TransformerLens does), its repository,
how many SAEs it holds, and — where its SAE ids are TransformerLens hook names (``blocks.8.hook_resid_pre``) — each
hook with its layers and the standard value it is (``nncanon.guards.other_names.TRANSFORMER_LENS``, which the build
checks against TransformerBridge). tests/test_sae_index.py recomputes the mapping from that table, so the kept file
cannot drift from it. Other releases name their hook point only in each SAE's cfg.json on the hub, which no build
reads: the index says so.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

KEPT = Path(__file__).with_name("saelens_releases.json")
_INNER = "sae_lens/pretrained_saes.yaml"
_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.(hook_\w+|\w+\.hook_\w+)$")
#: ids the hub moved under an organisation; TransformerLens still resolves to the old ones
HUB_MOVED = {"gpt2": "openai-community/gpt2", "gpt2-medium": "openai-community/gpt2-medium",
             "gpt2-large": "openai-community/gpt2-large", "gpt2-xl": "openai-community/gpt2-xl"}


def standard_hooks() -> dict[str, str]:
    """TransformerLens hook template (``blocks.{i}.hook_resid_pre``) -> the standard value's path."""
    from nncanon.guards.other_names import TRANSFORMER_LENS, TRANSFORMER_LENS_UNCHECKED

    out = {}
    for (host, name), (hooks, _) in TRANSFORMER_LENS.items():
        for hook in hooks.split("|"):
            out[hook] = f"{host}.{name}"
    for hook, path in TRANSFORMER_LENS_UNCHECKED.items():
        out[f"blocks.{{i}}.attn.{hook}"] = path
    return out


def checkpoint_of(model: str) -> str:
    """The hub id of a model SAELens names (TransformerLens's alias, or the hub id itself)."""
    try:
        from transformer_lens.supported_models import get_official_model_name

        official = get_official_model_name(model)
    except Exception:  # noqa: BLE001 - a model TransformerLens does not list is named by its hub id already
        official = model
    return HUB_MOVED.get(official, official)


#: TransformerLens's short hook names inside a block (its hook_dict aliases): ``blocks.0.hook_z`` is the attention's
_ALIASES = {f"hook_{h}": f"attn.hook_{h}" for h in ("z", "q", "k", "v", "pattern", "attn_scores", "result")}


def hook_template(rest: str, standard: dict[str, str]) -> str:
    """The hook an SAE id under ``blocks.N.`` names, without the release's own suffix: ``hook_resid_post__trainer_3``
    (a trainer of a sweep) and ``hook_resid_pre_768`` (a width) are ``hook_resid_post`` and ``hook_resid_pre``."""
    known = {t[len("blocks.{i}."):] for t in standard if t.startswith("blocks.{i}.")} | set(_ALIASES)
    for base in sorted(known, key=len, reverse=True):
        if rest == base or rest.startswith(base + "__") or re.fullmatch(re.escape(base) + r"_\d+", rest):
            return "blocks.{i}." + _ALIASES.get(base, base)
    return "blocks.{i}." + rest


def hooks_of(ids: list[str], standard: dict[str, str]) -> dict | None:
    """The release's hooks, if every SAE id is a TransformerLens hook name: template -> layers, how many SAEs, and
    the standard value (None where no standard value is that hook)."""
    found: dict[str, dict] = {}
    for sae_id in ids:
        match = _BLOCK_HOOK.match(sae_id)
        if not match:
            return None
        template = hook_template(match.group(2), standard)
        entry = found.setdefault(template, {"layers": [], "saes": 0, "value": standard.get(template)})
        entry["layers"].append(int(match.group(1)))
        entry["saes"] += 1
    for entry in found.values():
        entry["layers"] = sorted(set(entry["layers"]))
    return found


def extract(wheel: Path) -> dict:
    import yaml

    with zipfile.ZipFile(wheel) as archive:
        raw = yaml.safe_load(archive.read(_INNER))
    version = re.search(r"sae_lens-([^-]+)-", Path(wheel).name)
    standard = standard_hooks()
    releases = []
    for name, release in sorted(raw.items()):
        ids = [s["id"] for s in release.get("saes") or []]
        releases.append({"release": name, "model": release["model"], "checkpoint": checkpoint_of(release["model"]),
                         "repo": release["repo_id"], "saes": len(ids), "example": ids[0] if ids else None,
                         "hooks": hooks_of(ids, standard)})
    return {"source": f"{_INNER} in sae-lens {version.group(1) if version else '?'} (its PyPI wheel)",
            "releases": releases}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python -m generator.survey.saelens path/to/sae_lens-<version>-py3-none-any.whl "
              "(pip download sae-lens --no-deps)", file=sys.stderr)
        return 2
    data = extract(Path(argv[0]))
    KEPT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{KEPT}: {len(data['releases'])} releases from {data['source']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
