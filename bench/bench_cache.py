"""The standard cache vs reading one by one vs raw nnsight vs a plain forward with PyTorch hooks.

Run: python bench/bench_cache.py [--repeats N] [--only tiny|100m]. Reads the residual stream and each
mixer's and MLP's output on every block plus the logits (boundary values, so the cache runs on plain
hooks alone), on two models, each measured side by side in one run (interleaved, so machine noise
hits every contender alike):

- the tiny qwen3_5_moe_text checkpoint (the two prompts of the tests);
- a ~100M-parameter Llama config with random weights, 128 tokens, batch 1.

Contenders: a plain forward of an unwrapped copy of the model (no hooks), the same with plain
PyTorch forward hooks keeping the same tensors (the baseline), ``model.cache(...)``, the same
values read one by one in an nncanon trace, and raw nnsight reading the same module inputs and
outputs by native names. Target: the cache <= 1.05x the plain forward with hooks on the 100M config.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from nnsight.modeling.transformers import TransformersModel

import nncanon
from generator.checkpoint.checkpoints import checkpoint_dir
from generator.recipe.family import get_family
from nncanon.families import llama as llama_family
from nncanon.families import qwen3_5_moe_text as qwen_family
from nncanon.parts import loading

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]
BLOCK_VALUES = ["layer_input", "layer_mid", "layer_output", "mlp.mlp_output"]


def mixers(model) -> list[str]:
    """Each block's mixer: linear_attn or self_attn."""
    return ["linear_attn" if hasattr(model.layers[i], "linear_attn") else "self_attn" for i in range(model.num_layers)]


def plain_hooks(module, layers, kinds, kept: list):
    """Plain PyTorch hooks keeping the tensors the cache keeps; returns the handles."""
    handles = []
    for layer, mixer in zip(layers, kinds):
        handles.append(layer.register_forward_pre_hook(lambda m, a, k: kept.append(a[0] if a else k["hidden_states"]),
                                                       with_kwargs=True))
        handles.append(getattr(layer, mixer).register_forward_hook(
            lambda m, a, o: kept.append(o[0] if isinstance(o, tuple) else o)))
        handles.append(layer.post_attention_layernorm.register_forward_pre_hook(lambda m, a: kept.append(a[0])))
        handles.append(layer.mlp.register_forward_hook(lambda m, a, o: kept.append(o)))
        handles.append(layer.register_forward_hook(lambda m, a, o: kept.append(o[0] if isinstance(o, tuple) else o)))
    handles.append(module.register_forward_hook(lambda m, a, o: kept.append(o.logits)))
    return handles


def read_one_by_one(model, kinds, saved):
    for i, mixer in enumerate(kinds):
        block = model.layers[i]
        saved += [block.layer_input.save(), getattr(block, mixer).attention_output.save(), block.layer_mid.save(),
                  block.mlp.mlp_output.save(), block.layer_output.save()]
    saved.append(model.logits.save())


def read_raw(raw, kinds, saved):
    for i, mixer in enumerate(kinds):
        block = raw.model.layers[i]
        saved.append(block.input.save())
        out = getattr(block, mixer).output
        saved += [(out[0] if isinstance(out, tuple) else out).save(), block.post_attention_layernorm.input.save(),
                  block.mlp.output.save()]
        out = block.output
        saved.append((out[0] if isinstance(out, tuple) else out).save())
    saved.append(raw.output.logits.save())


def bench(label: str, ours, plain_module, raw, inputs: list[str], repeats: int) -> None:
    kinds = mixers(ours)
    names = BLOCK_VALUES + [f"{m}.attention_output" for m in dict.fromkeys(kinds)] + ["logits"]
    encoded = ours.tokenizer(inputs, return_tensors="pt", padding=True)
    from nnsight.modeling import processing

    args, forward = processing.batch_forward(ours, [((inputs,), {})])  # what a trace hands the module
    layers = plain_module.model.layers

    def run_plain():
        with torch.no_grad():
            return plain_module(*args, **forward)

    def run_hooks():
        kept: list = []
        handles = plain_hooks(plain_module, layers, kinds, kept)
        try:
            with torch.no_grad():
                plain_module(*args, **forward)
        finally:
            for handle in handles:
                handle.remove()
        return kept

    def run_cache():
        return ours.cache(names, inputs)

    def run_one_by_one():
        saved: list = []
        with torch.no_grad(), ours.trace(inputs):
            read_one_by_one(ours, kinds, saved)
        return saved

    def run_raw():
        saved: list = []
        with torch.no_grad(), raw.trace(inputs):
            read_raw(raw, kinds, saved)
        return saved

    cache = run_cache()
    one = run_one_by_one()
    assert len(cache) == len(one) == len(run_hooks()) == len(run_raw()), (len(cache), len(one))
    by_key = {k: v for k, v in cache.items()}
    assert torch.equal(by_key["logits"], one[-1]) and torch.equal(by_key["layers.0.layer_input"], one[0])
    runs = {"plain forward": run_plain, "plain + hooks": run_hooks, "nncanon cache": run_cache,
            "one by one": run_one_by_one, "raw nnsight": run_raw}
    for _ in range(2):
        for fn in runs.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    base = median["plain + hooks"]
    batch, seq = encoded["input_ids"].shape
    params = sum(p.numel() for p in plain_module.parameters()) / 1e6
    print(f"{label}: {params:.0f}M parameters, batch {batch} x {seq} tokens, {len(cache)} values, "
          f"{repeats} runs each (medians)")
    for name, value in median.items():
        print(f"  {name:<14} {value * 1e3:9.2f} ms   {value / base:5.3f}x plain + hooks")
    print(f"  nncanon cache / plain + hooks  {median['nncanon cache'] / base:.3f}x  (target <= 1.05x)")


def tiny(repeats: int) -> None:
    directory = checkpoint_dir(get_family(qwen_family.FAMILY))
    ours = nncanon.load(directory)
    plain = loading.text_model(directory, qwen_family.hf.Qwen3_5MoeForCausalLM, "model.language_model.").eval()
    raw_module = loading.text_model(directory, qwen_family.hf.Qwen3_5MoeForCausalLM, "model.language_model.").eval()
    raw = TransformersModel(raw_module, tokenizer=ours.tokenizer, task="text-generation")
    bench(f"tiny {qwen_family.FAMILY}", ours, plain, raw, PROMPTS, repeats)


def hundred_m(repeats: int) -> None:
    """A Llama config of ~100M parameters with random weights (nothing downloaded), 128 tokens."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                         num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=512,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    module = LlamaForCausalLM(config).eval()
    plain = copy.deepcopy(module)
    raw_module = copy.deepcopy(module)
    tokenizer = nncanon.load(checkpoint_dir(get_family(llama_family.FAMILY))).tokenizer
    ours = nncanon.wrap(llama_family, module, "text-generation", tokenizer=tokenizer)
    raw = TransformersModel(raw_module, tokenizer=tokenizer, task="text-generation")
    words = ("the cat sat on the mat because it was warm and the dog ran to the door " * 40).split()
    text = " ".join(words)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    prompt = next(p for n in range(100, 160) for p in [tokenizer.decode(ids[:n])]
                  if len(tokenizer(p)["input_ids"]) == 128)
    bench("~100M llama config", ours, plain, raw, [prompt], repeats)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--only", choices=["tiny", "100m"])
    options = parser.parse_args()
    torch.set_num_threads(1)  # one thread: the runs compete for the same core, not for a pool
    if options.only in (None, "tiny"):
        tiny(options.repeats)
    if options.only in (None, "100m"):
        hundred_m(max(5, options.repeats // 2))


if __name__ == "__main__":
    main()
