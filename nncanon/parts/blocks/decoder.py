"""The decoder every family starts from: the model root, the block, and a text-only family's loading.

Each host here is what Llama's tree has; a family subclasses the ones it changes (sandwich norms, a
parallel block) and says in its module which module class each host wraps. Locators name children by
their standard names (aliases resolve), so one declaration serves every family whose RENAME maps its
native names onto them. The sequence mixers, MLPs and mixtures a block holds are parts of their own
(``attention``, ``mlp``, ``mixture``, ``deltanet``, ``ssd``); each part carries the relations that
state what its values mean.
"""

from __future__ import annotations

import torch

from ...core.hosts import host
from ...core.layouts import Logits, NextTokenProbs, Residual, Scalar, Tokens
from ...core.locators import FIRST, child, own
from ...core.relations import called, first, relation
from ...core.values import Value
from ...core.views import READ_ONLY, derived

# -- the model root ---------------------------------------------------------------------------


@relation("layers[i].layer_output == layers[i+1].layer_input, on every block", proves="layers[*].layer_input",
          reads="layers[*].layer_output layers[*].layer_input")
def _stack(host, r):
    outs, ins = r["layers[*].layer_output"], r["layers[*].layer_input"]
    return [(first(out), inp) for out, inp in zip(outs[:-1], ins[1:])]


@relation("layers[0].layer_input == token_embeddings", proves="token_embeddings",
          reads="token_embeddings layers[0].layer_input")
def _embeddings(host, r):
    return [(r["token_embeddings"], r["layers[0].layer_input"])]


@relation("final_norm_output == norm(layers[-1].layer_output)", proves="final_norm_output",
          reads="layers[-1].layer_output final_norm_output")
def _final_norm(host, r):
    return [(host.norm._module(r["layers[-1].layer_output"]), r["final_norm_output"])]


@relation("lm_head_output == lm_head(final_norm_output)", proves="lm_head_output",
          reads="final_norm_output lm_head_output")
def _head(host, r):
    return [(called(host.lm_head._module, r["final_norm_output"]), r["lm_head_output"])]


@relation("logits == lm_head_output (nothing past the head)", proves="logits", reads="lm_head_output logits")
def _logits(host, r):
    return [(r["lm_head_output"], r["logits"])]


@relation("unembed(layers[-1].layer_output) == logits: the lens (model.unembed) applies the final norm, the head "
          "and what the model does past it", proves="", reads="layers[-1].layer_output logits")
def _lens(host, r):
    return [(host.unembed(r["layers[-1].layer_output"]), r["logits"])]


@relation("next_token_probs == softmax(logits[:, -1])", proves="next_token_probs", reads="logits next_token_probs")
def _probs(host, r):
    return [(r["logits"][:, -1].softmax(-1), r["next_token_probs"])]


@relation("input_ids == what embed_tokens embeds; input_size == input_ids.shape",
          proves="input_ids input_size", reads="embed_tokens.input input_ids input_size")
def _ids(host, r):
    ids = r["embed_tokens.input"]
    return [(ids, r["input_ids"]), (torch.tensor(list(ids.shape)), torch.tensor(r["input_size"]))]


@relation("attention_mask == the batch's mask: 0 exactly on the left padding", proves="attention_mask",
          reads="input_ids attention_mask")
def _mask(host, r):
    """Left padding: a row's zeros come first, and every zero sits on the pad token."""
    mask, ids = r["attention_mask"], r["input_ids"]
    pad = host.tokenizer.pad_token_id
    expected = torch.ones_like(mask)
    for row in range(mask.shape[0]):
        padding = int((ids[row] == pad).cumprod(0).sum()) if pad is not None else 0
        expected[row, :padding] = 0
    return [(expected, mask)]


ROOT_RELATIONS = (_stack, _embeddings, _final_norm, _head, _logits, _lens, _probs, _ids, _mask)

# -- the block ------------------------------------------------------------------------------------


@relation("layer_input + {mixer}.attention_output == layer_mid", proves="layer_mid {mixer}.attention_output",
          reads="layer_input {mixer}.attention_output layer_mid",
          adds=("layer_input", "{mixer}.attention_output", "layer_mid"))
def _mixer_add(host, r):
    return [(r["layer_input"] + r["{mixer}.attention_output"], r["layer_mid"])]


@relation("layer_mid + mlp.mlp_output == layer_output", proves="layer_output mlp.mlp_output",
          reads="layer_mid mlp.mlp_output layer_output", adds=("layer_mid", "mlp.mlp_output", "layer_output"))
def _mlp_add(host, r):
    return [(r["layer_mid"] + r["mlp.mlp_output"], r["layer_output"])]


@relation("attention_norm_output == input_layernorm(layer_input) == what {mixer} is called with",
          proves="attention_norm_output", reads="layer_input attention_norm_output {mixer}.input")
def _attention_norm(host, r):
    return [(host.input_layernorm._module(r["layer_input"]), r["attention_norm_output"]),
            (r["{mixer}.input"], r["attention_norm_output"])]


@relation("mlp_input == mlp_norm_output == post_attention_layernorm(layer_mid)", proves="mlp_norm_output mlp_input",
          reads="layer_mid mlp_norm_output mlp_input")
def _mlp_norm(host, r):
    return [(host.post_attention_layernorm._module(r["layer_mid"]), r["mlp_norm_output"]),
            (r["mlp_norm_output"], r["mlp_input"])]


BLOCK_RELATIONS = (_mixer_add, _mlp_add, _attention_norm, _mlp_norm)

# -- the model root ------------------------------------------------------------------

ROOT_VALUES = [
    Value("logits", Logits, "The logits the model returns, after anything it does past lm_head (a softcap, a scale)",
          own("output", attr="logits")),
    Value("token_embeddings", Residual, "The embedding module's output; layers[0].input is what enters the first block",
          child("embed_tokens")),
    Value("final_norm_output", Residual, "The residual stream after the final norm, what lm_head reads",
          child("norm")),
    Value("lm_head_output", Logits, "The head's logits before anything the model does past lm_head (a softcap, a scale)",
          child("lm_head")),
    Value("next_token_probs", NextTokenProbs, "The next-token distribution at the last position; derived, read-only",
          own("output", attr="logits"), view=derived("softmax of the last position", lambda x: x[:, -1].softmax(-1))),
    Value("input_ids", Tokens, "The token ids the model was called with", own("input", element="input_ids"),
          view=READ_ONLY),
    Value("attention_mask", Tokens, "The attention mask the model was called with; zeros are padding",
          own("input", element="attention_mask"), view=READ_ONLY),
    Value("input_size", Scalar, "[batch, seq] of the current call; read-only", own("input", element="input_ids"),
          view=derived("shape", lambda ids: list(ids.shape))),
]

# -- the block ---------------------------------------------------------------------

Block = host("Block", values=[
    Value("layer_input", Residual, "The residual stream entering the block", own("input")),
    Value("attention_norm_output", Residual, "The normed stream entering the attention", child("input_layernorm")),
    Value("layer_mid", Residual, "The residual stream after the attention add", child("post_attention_layernorm", "input"),
          assign_in_place=True),
    Value("mlp_norm_output", Residual, "The normed stream entering the MLP", child("post_attention_layernorm")),
    Value("mlp_input", Residual, "What the MLP is called with", child("mlp", "input")),
    Value("layer_output", Residual,
          "The residual stream leaving the block, a tensor even when the block returns a tuple",
          own("output", element=FIRST)),
], HOST="model.layers[i]", KIND="block", RELATIONS=BLOCK_RELATIONS, MIXERS=("self_attn", "linear_attn"))

# -- a text-only decoder family (a causal LM whose text stack is model.model) ------------------

#: the causal LM's text stack, mounted at the root
TEXT_RENAME = {"model.embed_tokens": "embed_tokens", "model.layers": "layers", "model.norm": "norm"}

#: the standard paths every such family must resolve (StandardModel checks them at load)
TEXT_PATHS = ["embed_tokens", "layers", "norm", "lm_head", "layers.0.input_layernorm", "layers.0.self_attn",
              "layers.0.post_attention_layernorm", "layers.0.mlp"]


def text_only(causal_cls: type, wrapper_prefix: str | None = None):
    """A family's ``build``: ``causal_cls`` (also ``build.causal_lm``) from a local checkpoint, with its tokenizer.

    With ``wrapper_prefix`` (``"model.language_model."``) a multimodal wrapper's checkpoint loads
    too, as its text stack alone (`nncanon.parts.loading.text_model`).
    """
    from .. import loading

    def build(checkpoint, task: str, **hf_kwargs):
        loading.check_task(task)
        if task != "text-generation":
            raise ValueError(f"task={task!r}: {causal_cls.__name__} is a text-only model; "
                             "load it with task='text-generation' (the default)")
        if wrapper_prefix is not None:
            module = loading.text_model(checkpoint, causal_cls, wrapper_prefix, **hf_kwargs)
        else:
            module = loading.pretrained(causal_cls, checkpoint, **hf_kwargs)
        return module, {"tokenizer": loading.tokenizer(checkpoint)}

    build.causal_lm = causal_cls
    return build


def attention_layer_types(model) -> list[str]:
    """config.layer_types, or full_attention on every block for a config that has none."""
    config = model.text_config
    return list(getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers)


def nothing_to_prepare(model) -> None:
    """``prepare`` of a family whose values need nothing installed beyond their locators."""
