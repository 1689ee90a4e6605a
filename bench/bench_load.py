"""What a meta-first load of a full-size model costs in memory, next to loading a tiny checkpoint.

Each case runs in a fresh process (so one case's allocations cannot hide another's) and reports how
far it raised the process's peak resident memory (``ru_maxrss``) above where it stood after importing
torch, transformers, nnsight and nncanon:

- tiny: ``nncanon.load`` of the family's tiny pinned checkpoint (weights read), its ``support()``
  and ``print(model)``;
- full-size, meta-first: ``nncanon.from_config`` of the full-size config in families/<family>.yaml
  (the encyclopedia's printout checkpoint), its ``support()`` and ``print(model)``, no weights.

Printed side by side with the parameters each model has and the bytes those would take in bfloat16,
and the ratio of the two peaks.

    python bench/bench_load.py [--family qwen3_5_moe_text] [--family llama]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CASE = r"""
import json, os, resource, sys
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import torch, transformers, nnsight
import nncanon
from generator.checkpoint.checkpoints import checkpoint_dir
from generator.recipe.family import get_family

family, case = sys.argv[1], sys.argv[2]
fam = get_family(family)
directory = checkpoint_dir(fam)  # built before the baseline: the bench measures the load, not the build
checkpoint = fam.printout_checkpoint
config = fam.checkpoint_config(checkpoint)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if case == "tiny":
    model = nncanon.load(directory)
else:
    model = nncanon.from_config(config)
rows = len(model.support())
lines = len(repr(model).splitlines())
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
params = sum(p.numel() for p in model._module.parameters())
meta = all(p.device.type == "meta" for p in model._module.parameters())
print(json.dumps({"peak_kib": after - before, "params": params, "rows": rows, "lines": lines, "meta": meta,
                  "name": directory.name if case == "tiny" else checkpoint}))
"""


def run(family: str, case: str) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CASE, family, case], env=env, capture_output=True, text=True,
                          cwd=root)
    if done.returncode != 0:
        sys.exit(f"{family} {case}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", action="append", help="families/<family>.yaml (default: qwen3_5_moe_text, llama)")
    families = parser.parse_args().family or ["qwen3_5_moe_text", "llama"]
    print(f"{'family':<18} {'case':<22} {'model':<34} {'parameters':>15} {'bf16 weights':>13} "
          f"{'peak RSS rise':>14} {'support rows':>13} {'printout lines':>15}")
    for family in families:
        results = {case: run(family, case) for case in ("tiny", "full")}
        for case, label in (("tiny", "tiny, weights loaded"), ("full", "full-size, meta-first")):
            r = results[case]
            print(f"{family:<18} {label:<22} {r['name'][:34]:<34} {r['params']:>15,} "
                  f"{r['params'] * 2 / 2**30:>10.2f} GiB {r['peak_kib'] / 1024:>10.1f} MiB {r['rows']:>13} "
                  f"{r['lines']:>15}")
            assert case == "tiny" or r["meta"], "the full-size model must hold no weights"
        ratio = results["full"]["peak_kib"] / max(results["tiny"]["peak_kib"], 1)
        weights = results["full"]["params"] * 2 / 1024
        print(f"{'':<18} full-size meta-first peak / tiny load peak: {ratio:.2f}x; "
              f"full-size peak / its bf16 weights: {results['full']['peak_kib'] / weights:.2e}")


if __name__ == "__main__":
    main()
