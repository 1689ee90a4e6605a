"""TransformerLens names: the TransformerLens hook each standard value corresponds to, checked.

:data:`NAMES` says which TransformerLens 4.3 hook (``TransformerBridge``, which runs the Hugging
Face module itself) holds the same tensor as a standard value. It is a claim, and :func:`check`
tests it on a family's tiny checkpoint: the values read through nncanon on block 1 and the root,
the hooks read through ``TransformerBridge.run_with_cache``, on the same prompt, under eager
attention (the bridge forces it). Each mapped value gets ``{"hook", "agreed", "error"}`` (the hook read on block 1, or the first block with the value's host);
``agreed`` is None where TransformerLens is not installed (an optional extra:
``pip install nncanon[transformer-lens]``) or does not bridge the family.

The check runs in a subprocess (``python -m generator.tl_names <family>``): booting a
bridge patches transformers' attention functions for the whole process, so nncanon's reads in the
same process after it would read another forward.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

#: (host pattern, value) -> (TransformerLens hook, ``{i}`` the block, ``a|b``: the first the bridge has; how its
#: tensor is laid out against the value's)
NAMES: dict[tuple[str, str], tuple[str, str | None]] = {
    ("model", "token_embeddings"): ("hook_embed", None),
    ("model", "logits"): ("logits", None),  # what run_with_cache returns
    ("model.layers[i]", "layer_input"): ("blocks.{i}.hook_resid_pre", None),
    ("model.layers[i]", "attention_norm_output"): ("blocks.{i}.ln1.hook_out", None),
    ("model.layers[i]", "layer_mid"): ("blocks.{i}.hook_resid_mid", None),
    ("model.layers[i]", "mlp_norm_output"): ("blocks.{i}.ln2.hook_out", None),
    ("model.layers[i]", "layer_output"): ("blocks.{i}.hook_resid_post", None),
    # a rotary model's queries and keys enter attention rotated (hook_rot_*); gpt2's are hook_q, hook_k
    ("model.layers[i].self_attn", "attention_queries"): ("blocks.{i}.attn.hook_rot_q|blocks.{i}.attn.hook_q",
                                                         "seq-first"),
    ("model.layers[i].self_attn", "attention_keys"): ("blocks.{i}.attn.hook_rot_k|blocks.{i}.attn.hook_k",
                                                      "seq-first"),
    ("model.layers[i].self_attn", "attention_values"): ("blocks.{i}.attn.hook_v", "seq-first"),
    ("model.layers[i].self_attn", "attention_scores"): ("blocks.{i}.attn.hook_attn_scores", None),
    ("model.layers[i].self_attn", "attention_probabilities"): ("blocks.{i}.attn.hook_pattern", None),
    ("model.layers[i].self_attn", "attention_head_outputs"): ("blocks.{i}.attn.hook_z", None),
    ("model.layers[i].self_attn", "attention_output"): ("blocks.{i}.hook_attn_out", None),
    ("model.layers[i].mlp", "mlp_neurons"): ("blocks.{i}.mlp.hook_post", None),
    ("model.layers[i].mlp", "mlp_output"): ("blocks.{i}.hook_mlp_out", None),
}
BLOCK = 1
PROMPT = "The cat sat on the mat"
#: the same tensor up to float32 sums in another order (gpt2's bridge differs by ~1e-6, llama's by 0)
ATOL, RTOL = 1e-5, 1e-5


def installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("transformer_lens") is not None


def _blocks(model: Any, host: str) -> tuple[int, ...]:
    return next((kind.blocks for kind in model.host_kinds() if kind.host == host), ())


def _key(host: str, name: str) -> str:
    return f"{host}::{name}"


def _measure(family: str) -> dict[str, dict]:
    """In this process: nncanon's reads first, then the bridge's (see the module docstring)."""
    import torch

    import nncanon
    from generator.checkpoints import checkpoint_dir

    directory = checkpoint_dir(family)
    model = nncanon.load(directory, attn_implementation="eager")
    served = {(row.host, row.name) for row in model.support() if row.available}
    mapped = {key: hook for key, hook in NAMES.items() if key in served}
    names = [name if host == "model" else f"{host[len('model.layers[i]'):].lstrip('.')}.{name}".lstrip(".")
             for host, name in mapped]
    # each value on the first block that has its host (a hybrid stack's attention is not on block 1)
    first = {kind.host: min(kind.blocks) for kind in model.host_kinds() if kind.blocks}
    block = {key: (None if key[0] == "model" else max(BLOCK, first[key[0]]) if BLOCK in _blocks(model, key[0])
                   else first[key[0]]) for key in mapped}
    ids = model.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    cache = model.cache(names, ids, blocks=sorted({b for b in block.values() if b is not None}))
    ours = {}
    for key, short in zip(mapped, names):
        ours[key] = cache[short if key[0] == "model" else f"layers.{block[key]}.{short}"]
    from transformer_lens.model_bridge import TransformerBridge

    try:
        bridge = TransformerBridge.boot_transformers(str(directory), tokenizer=model.tokenizer, device="cpu")
    except Exception as error:  # noqa: BLE001 - any refusal: the family is not bridged
        why = f"TransformerLens does not bridge {family}: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
        return {_key(*key): {"hook": hook.replace("|", " or "), "agreed": None, "why": why}
                for key, (hook, _) in mapped.items()}
    with torch.no_grad():
        logits, theirs = bridge.run_with_cache(ids)
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
        error = float((tensor.float() - value.float()).abs().max())
        agreed = bool(torch.allclose(tensor.float(), value.float(), atol=ATOL, rtol=RTOL))
        found[_key(host, name)] = {"hook": hook, "agreed": agreed, "error": error}
    return found


def check(family: str) -> dict[str, dict]:
    """``"host::value"`` -> ``{"hook", "agreed", "error"}`` for every mapped value the family serves; agreed None
    (with ``why``) where TransformerLens is not installed or does not bridge the family."""
    if not installed():
        return {_key(*key): {"hook": hook.replace("|", " or "), "agreed": None, "why": "TransformerLens is not installed"}
                for key, (hook, _) in NAMES.items()}
    run = subprocess.run([sys.executable, "-m", "generator.tl_names", family], capture_output=True,
                         text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"{family}: the TransformerLens check failed: {run.stderr.strip().splitlines()[-1:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def annotate(hosts: list[dict], found: dict[str, dict]) -> None:
    """Put each checked value's TransformerLens hook and agreement in the facts' value entries."""
    for host in hosts:
        for value in host["values"]:
            entry = found.get(_key(host["path"], value["name"]))
            if entry is not None:
                value["transformer_lens"] = entry


def main(argv: list[str]) -> None:
    import os
    import warnings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore")
    print(json.dumps(_measure(argv[0]), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
