"""What reading ``linear_attn.states`` costs: time and peak memory over a 1,024-token prompt.

Runs on the family's tiny pinned checkpoint (built from the recipe if it is not cached) and
prints, side by side and as ratios to the plain forward:

- the plain forward: the Hugging Face model alone, no nnsight, transformers' chunked kernel;
- the plain forward under route_kernels(family, "torch") (no trace): the token-by-token kernel's cost;
- a trace on the default route reading only the logits;
- a trace on the torch route reading only the logits (states not read, so never built);
- a trace on the torch route reading ``states`` of every DeltaNet block.

Time: the fastest of ``--repeats`` runs after a warm-up, the cases taking turns (other load on
the machine only adds time, and falls on every case alike). Peak memory: the highest total of
live CPU tensor bytes allocated during one run, as the torch profiler's memory records report
it (tensors that existed before the run, the weights, are not counted).

    python bench/bench_states.py [--tokens 1024] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from torch._C._profiler import _EventType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import nncanon  # noqa: E402
from nncanon.families import family_module
from nncanon.parts.recurrent import deltanet

FAMILY = "qwen3_5_moe_text"
TEXT = ("The cat sat on the mat because it was warm, and the dog ran after a ball in the garden "
        "while the children laughed and the sun went down behind the hills. ")


def prompt_ids(tokenizer, tokens: int) -> torch.Tensor:
    text = TEXT
    while True:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        if ids.shape[1] >= tokens:
            return ids[:, :tokens]
        text += TEXT


def peak_bytes(run) -> int:
    """The peak of live CPU tensor bytes allocated during ``run()``.

    The profiler records, with each allocation, the CPU allocator's running total of the
    bytes allocated while profiling and not yet freed (``total_allocated``); its maximum is
    the run's peak. Tensors that existed before (the weights) are not in that total.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    peak, nodes = 0, list(prof.profiler.kineto_results.experimental_event_tree())
    while nodes:
        node = nodes.pop()
        nodes.extend(node.children)
        if node.tag == _EventType.Allocation:
            peak = max(peak, node.extra_fields.total_allocated)
    return peak


def best_times(runs: list, repeats: int) -> list[float]:
    """The fastest of ``repeats`` timed runs of each, after a warm-up; the runs take turns, so a
    change in the machine's other load falls on all of them alike (and only ever adds time)."""
    for run in runs:
        run()
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier timings)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")

    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    checkpoint = checkpoint_dir(get_family(FAMILY))
    model = nncanon.load(checkpoint)
    plain, _ = family_module(FAMILY).build(checkpoint, "text-generation")  # no nnsight around it
    plain.eval()
    ids = prompt_ids(model.tokenizer, args.tokens)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    linear = [i for i, t in enumerate(model.text_config.layer_types) if t == "linear_attention"]

    def plain_forward():
        plain(**inputs)

    def routed_plain_forward():
        with nncanon.route_kernels(model.family, "torch"):
            model._module(**inputs)

    def trace(route: str, states: bool):
        def run():
            kept = []  # the states read stay alive after the trace, as a user's would
            with nncanon.route_kernels(model.family, route), model.trace(inputs):
                if states:
                    for layer in linear:
                        kept.append(model.layers[layer].linear_attn.states.save())
                model.logits.save()
            return kept
        return run

    cases = [
        ("plain forward (no nnsight)", plain_forward),
        ('plain forward, route "torch"', routed_plain_forward),
        ('trace, route "fla" (default), logits', trace("fla", False)),
        ('trace, route "torch", states not read', trace("torch", False)),
        (f'trace, route "torch", states of {len(linear)} blocks', trace("torch", True)),
    ]
    with torch.no_grad():
        times = best_times([run for _, run in cases], args.repeats)
        peaks = [peak_bytes(run) for _, run in cases]
    results = [(name, took, peak) for (name, _), took, peak in zip(cases, times, peaks)]

    per_token = deltanet.state_bytes_per_token(model.text_config)
    print(f"{FAMILY} tiny checkpoint, {args.tokens}-token prompt, {len(linear)} DeltaNet blocks; "
          f"states: {deltanet.human_bytes(per_token)} per token per block here, "
          f"{deltanet.human_bytes(per_token * args.tokens * len(linear))} for all blocks; "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), time: best of {args.repeats}")
    base_time, base_peak = results[0][1], results[0][2]
    print(f"{'':44} {'time':>9} {'x plain':>8} {'peak MiB':>9} {'x plain':>8}")
    for name, took, peak in results:
        print(f"{name:44} {took * 1e3:7.1f}ms {took / base_time:8.2f} {peak / 2**20:9.1f} {peak / base_peak:8.2f}")


if __name__ == "__main__":
    main()
