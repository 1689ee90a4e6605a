"""A trace reading 40 text values: nncanon vs the same reads through raw nnsight vs a plain forward.

Run: python bench/bench_text.py [--repeats N]. Prints medians measured side by side in one run
(interleaved, so machine noise hits all three alike) and the ratios. Target: nncanon <= 1.10x
raw nnsight.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from nnsight.modeling.transformers import TransformersModel

import nncanon
from generator.checkpoint.checkpoints import checkpoint_dir
from generator.recipe.family import get_family
from nncanon.families import qwen3_5_moe_text as family
from nncanon.parts import loading

PROMPTS = ["The cat sat on the mat because it was warm.", "A dog ran."]
DELTA, ATTN = 1, 3


def read_nncanon(model, saved):
    for i in (DELTA, ATTN):
        block = model.layers[i]
        mixer = block.linear_attn if i == DELTA else block.self_attn
        saved += [block.layer_input.save(), block.attention_norm_output.save()]
        if i == DELTA:
            saved += [mixer.attention_queries.save(), mixer.attention_keys.save(), mixer.attention_values.save(),
                      mixer.decays.save(), mixer.betas.save(), mixer.attention_head_outputs.save(),
                      mixer.state_output.save()]
        else:
            saved += [mixer.attention_queries.save(), mixer.attention_keys.save(), mixer.attention_values.save(),
                      mixer.attention_head_outputs.save(), mixer.attention_premix.save()]
        saved += [mixer.attention_output.save(), block.layer_mid.save(), block.mlp_norm_output.save(),
                  block.mlp.shared_experts.mlp_output.save(),
                  block.mlp.router_logits.save(), block.mlp.expert_weights.save(), block.mlp.expert_indices.save(),
                  block.mlp.expert_outputs.save(), block.mlp.routed_output.save(),
                  block.mlp.shared_expert_output.save(), block.mlp.mlp_output.save(), block.layer_output.save()]


def read_raw(model, batch, seq, saved):
    """The same 40 reads written against nnsight's own API and native names."""
    for i in (DELTA, ATTN):
        block = model.model.layers[i]
        saved += [block.input.save(), block.input_layernorm.output.save()]
        if i == DELTA:
            kernel = block.linear_attn.source.torch_chunk_gated_delta_rule_0
            args, kwargs = kernel.inputs
            saved += [args[0].save(), args[1].save(), args[2].save(), kwargs["g"].save(), kwargs["beta"].save()]
            out = kernel.output
            saved += [out[0].save(), out[1].save(), block.linear_attn.output.save()]
        else:
            call = block.self_attn.source.attention_interface_1
            args, _ = call.inputs
            saved += [args[1].save(), args[2].save(), args[3].save(), call.output[0].save()]
            premix = block.self_attn.o_proj.input
            saved += [premix.unflatten(-1, (-1, 32)).save(), block.self_attn.output[0].save()]
        saved += [block.post_attention_layernorm.input.save(), block.post_attention_layernorm.output.save(),
                  block.mlp.shared_expert.output.view(batch, seq, -1).save(),
                  block.mlp.gate.source.F_linear_0.output.view(batch, seq, -1).save()]
        experts_args, _ = block.mlp.experts.inputs
        saved += [experts_args[2].view(batch, seq, -1).save(), experts_args[1].view(batch, seq, -1).save()]
        slots = block.mlp.experts.source.experts_forward_1.source.weighted_out_view_0.output
        saved += [slots.view(batch, seq, *slots.shape[1:]).save(), block.mlp.experts.output.view(batch, seq, -1).save(),
                  block.mlp.source.shared_expert_output_1.output.view(batch, seq, -1).save(),
                  block.mlp.output.save(), block.output.save()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    repeats = parser.parse_args().repeats
    torch.set_num_threads(1)  # one thread: the three runs compete for the same core, not for a pool
    directory = checkpoint_dir(get_family(family.FAMILY))
    ours = nncanon.load(directory)
    plain = loading.text_model(directory, family.hf.Qwen3_5MoeForCausalLM, "model.language_model.").eval()
    raw_module = loading.text_model(directory, family.hf.Qwen3_5MoeForCausalLM, "model.language_model.").eval()
    raw = TransformersModel(raw_module, tokenizer=ours.tokenizer, task="text-generation")
    for i in (DELTA, ATTN):  # the sources nncanon installs at load, installed for raw nnsight too
        block = raw.model.layers[i]
        _ = (block.linear_attn if i == DELTA else block.self_attn).source
        _ = block.mlp.source, block.mlp.gate.source, block.mlp.experts.source
    encoded = ours.tokenizer(PROMPTS, return_tensors="pt", padding=True)
    batch, seq = encoded["input_ids"].shape

    # nnsight runs a trace's body in its own frame: the reads land in a list made outside it
    def run_ours():
        values = []
        with torch.no_grad(), ours.trace(PROMPTS):
            read_nncanon(ours, values)
        return values

    def run_raw():
        values = []
        with torch.no_grad(), raw.trace(PROMPTS):
            read_raw(raw, batch, seq, values)
        return values

    def run_plain():
        with torch.no_grad():
            return plain(**encoded)

    a, b = run_ours(), run_raw()
    assert len(a) == len(b) == 40, (len(a), len(b))
    for x, y in zip(a, b):
        assert torch.equal(x, y), "nncanon and raw nnsight read different tensors"
    times = {"nncanon": [], "raw nnsight": [], "plain forward": []}
    runs = {"nncanon": run_ours, "raw nnsight": run_raw, "plain forward": run_plain}
    for _ in range(3):
        for fn in runs.values():
            fn()
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"40 values on the tiny {family.FAMILY} checkpoint, batch {batch} x {seq} tokens, {repeats} runs each")
    for name, value in median.items():
        print(f"  {name:<14} {value * 1e3:8.2f} ms (median)")
    print(f"  nncanon / raw nnsight   {median['nncanon'] / median['raw nnsight']:.3f}x  (target <= 1.10x)")
    print(f"  raw nnsight / plain     {median['raw nnsight'] / median['plain forward']:.2f}x")
    print(f"  nncanon / plain         {median['nncanon'] / median['plain forward']:.2f}x")


if __name__ == "__main__":
    main()
