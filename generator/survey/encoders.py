"""The survey's second vocabulary: a masked-LM, seq2seq, speech-to-text or CTC model type on the encoder parts.

A model type on none of the decoder lists (``kinds.KINDS``) is built tiny as its kind's class, called with what
that kind takes, and mounted on the parts of the verified family the kind is built most like, as
``tree.discover`` mounts a causal LM on Llama's:

- masked LM: BERT's (``nncanon/parts/encoders/post_norm.py``, ``bidirectional.py``, ``embeddings.py``): one
  bidirectional stack at ``layers``, ids with a right-padded mask, so padding is masked in both directions;
- seq2seq: BART's (``seq2seq.py``, ``attention/cross_attention.py``): ``encoder`` and ``decoder`` stacks, the
  decoder's second attention as ``cross_attn``; ids and a padded mask, and ``decoder_input_ids`` where the model
  does not make them itself (BART shifts the source ids; T5 needs them);
- speech-to-text: Whisper's (``speech.py``): the same two stacks, the encoder over ``input_features`` from the
  type's own feature extractor, built here from its class's defaults (no download) on a fixed tone;
- CTC: BART's encoder stack and its blocks, over ``input_values`` from the feature extractor.

Where the guess is wrong (a tree that names its sublayers otherwise, a front end the parts do not describe) the
values that do not resolve and the relations that do not hold say so, as on a decoder's row; the machinery
(``measure``'s reads, relations and chain) is the decoder survey's, given these hosts.
"""

from __future__ import annotations

import inspect
import math
import sys
import types
import warnings
from typing import Any

from generator.survey.chain_gap import chain
from generator.survey.measure import (
    BUDGET_S,
    OUTSIDE_THE_KEY,
    OverBudget,
    budget,
    build,
    one_line,
    quiet_transformers,
)
from generator.survey.shrink import SEQ, VOCAB, tiny_config

#: the rows of an encoder call: the second right-padded by PADDED tokens, so a relation sees a padded key on both
#: sides of a real query's row and a real key after it
ROWS, PADDED = 2, 2
#: the speech front ends' convolutions (wav2vec2's seven, 512 wide, and its 128-wide positional convolution) shrunk
#: as the blocks are: the survey runs a tiny model, and these alone hold 4M parameters at their defaults
SPEECH_SIZES = {"conv_dim": 32, "num_conv_pos_embeddings": 16, "tdnn_dim": 32, "num_mel_bins": 16,
                "input_feat_per_channel": 16}
#: a tone's samples per row: enough for a feature encoder's strides (wav2vec2's 320x) to leave a few frames
SAMPLES = 4000
#: names of a block's attention children: the first is its self-attention, a second its cross-attention
ATTENTION_WORDS = ("attention", "attn")
#: what a layer list sits under when it is not the text or speech stack (a conv front end's layers)
NOT_STACKS = ("feature_extractor", "conv", "pos_conv", "adapter", "quantizer")


class NotAStack(ValueError):
    """The built model has no list of blocks the encoder parts could mount."""


class NoFrontEnd(ValueError):
    """No feature extractor of the type's own gives what its forward takes."""


def _parts(kind: str) -> tuple[dict[str, type], dict[str, str], Any]:
    """(role -> host class, the reference family's renames, a root factory) of ``kind``'s parts."""
    from nncanon.parts.attention.cross_attention import (
        CrossAttention,
        DecoderSelfAttention,
        EncoderSelfAttention,
    )
    from nncanon.parts.encoders import seq2seq, speech
    from nncanon.parts.encoders.bidirectional import EncoderAttention
    from nncanon.parts.encoders.embeddings import encoder_root
    from nncanon.parts.encoders.post_norm import PostNormBlock

    if kind == "masked LM":
        return {"block": PostNormBlock, "self": EncoderAttention}, {}, encoder_root
    if kind == "speech-to-text":
        return ({"encoder": speech.SpeechEncoderStack, "decoder": speech.SpeechDecoderStack,
                 "encoder block": speech.SpeechEncoderBlock, "decoder block": speech.SpeechDecoderBlock,
                 "encoder self": speech.SpeechEncoderSelfAttention, "decoder self": speech.SpeechDecoderSelfAttention,
                 "cross": speech.SpeechCrossAttention}, speech.speech_rename(), speech.speech_root)
    blocks = {"encoder block": seq2seq.EncoderBlock, "encoder self": EncoderSelfAttention}
    if kind == "CTC":
        return blocks, {"out_proj": "o_proj"}, _ctc_root
    return ({**blocks, "encoder": seq2seq.EncoderStack, "decoder": seq2seq.DecoderStack,
             "decoder block": seq2seq.DecoderBlock, "decoder self": DecoderSelfAttention, "cross": CrossAttention},
            seq2seq.seq2seq_rename(), seq2seq.seq2seq_root)


def _ctc_root(name: str, family_module: Any) -> type:
    """A CTC model's root: its logits, what its head returns over the encoder's frames (no token ids, no tied head)."""
    from nncanon.core.hosts import host
    from nncanon.core.model import StandardModel
    from nncanon.parts.blocks.decoder import ROOT_VALUES

    return host(name, StandardModel, values=[v for v in ROOT_VALUES if v.name == "logits"], FINAL_NORM=False,
                family_module=family_module)


def hosts(kind: str) -> list[tuple[str, type]]:
    """(host path pattern, host class) of ``kind``'s parts, the root first: the row's M values and L relations."""
    roles, _, root = _parts(kind)
    probe = types.ModuleType("nncanon_survey_probe")
    return [("model", root("SurveyEncoderRoot", probe)), *((cls.HOST, cls) for cls in roles.values())]


def _is_attention(name: str, child: Any) -> bool:
    """An attention child: its name or class says so, and it is no norm of one (``self_attn_layer_norm``)."""
    words = f"{name} {type(child).__name__}".lower()
    return any(word in words for word in ATTENTION_WORDS) and "norm" not in words and "dropout" not in words


def _lists(model: Any) -> list[tuple[str, Any]]:
    """Every list of blocks holding an attention, outside a front end's convolutions, shallowest first."""
    import torch

    found = [(path, m) for path, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m)
             and any(_is_attention(n.rpartition(".")[2], c) for n, c in m[0].named_modules() if n)
             and not any(word in path.split(".") for word in NOT_STACKS)]
    return sorted(found, key=lambda pm: (pm[0].count("."), pm[0]))


def mount(model: Any, kind: str) -> tuple[dict, dict, list[str], list[str]]:
    """(RENAME, ENVOYS, required paths, shape words) of ``kind``'s parts on the built ``model``."""
    roles, rename, _ = _parts(kind)
    rename, envoys, paths, shape = dict(rename), {}, [], []
    lists = _lists(model)
    if not lists:
        raise NotAStack(f"no list of blocks with an attention in {type(model).__name__}")
    two = "decoder" in roles
    wanted = ("encoder", "decoder") if two else ("encoder",) if kind == "CTC" else ("layers",)
    for stack in wanted:
        path, layers = next(((p, m) for p, m in lists if stack == "layers" or p.split(".")[-2:-1] == [stack]),
                            (None, None))
        if path is None:
            raise NotAStack(f"no {stack} stack (a list of blocks under a module named {stack}) in "
                            f"{type(model).__name__}; it has {', '.join(p for p, _ in lists)}")
        parent, _, name = path.rpartition(".")
        if stack == "layers":
            rename[path] = "layers"
        else:
            if parent != stack:
                rename[parent] = stack
            envoys.setdefault(type(model.get_submodule(parent)), roles.get(stack))
            if name != "layers":
                rename[name] = "layers"
        prefix = "" if stack == "layers" else f"{stack}."
        block = roles["block" if stack == "layers" else f"{stack} block"]
        attentions = [n for n, c in layers[0].named_children() if _is_attention(n, c)]
        for layer in layers:
            envoys[type(layer)] = block
        if attentions and attentions[0] != "self_attn":
            rename[type(getattr(layers[0], attentions[0]))] = "self_attn"
        if attentions:  # a block whose attention sits deeper (T5's layer[0].SelfAttention) has none mounted
            envoys[f"{prefix}layers.*.self_attn"] = roles["self" if stack == "layers" else f"{stack} self"]
        if stack == "decoder" and len(attentions) > 1:
            rename[attentions[1]] = "cross_attn"
            envoys["cross_attn"] = roles["cross"]
        paths += [f"{prefix}layers", *([f"{prefix}layers.0.self_attn"] if attentions else [])]
        shape.append(f"{stack}: {len(layers)} blocks of {type(layers[0]).__name__}, {len(attentions)} attention"
                     f"{'s' * (len(attentions) != 1)}")
    if kind == "masked LM":
        rename.update(_embeddings_and_head(model))
    envoys = {k: v for k, v in envoys.items() if v is not None}
    return rename, envoys, list(dict.fromkeys([*(s for s in wanted if s != "layers"), *paths])), shape


#: an encoder's embeddings and head children by their native names -> BERT's standard ones (embeddings.py)
EMBEDDINGS = {"position_embeddings": "embed_positions", "token_type_embeddings": "embed_token_types",
              "LayerNorm": "embed_layernorm", "layer_norm": "embed_layernorm", "norm": "embed_layernorm"}
HEAD = {"transform": "head_transform"}


def _embeddings_and_head(model: Any) -> dict[str, str]:
    """The masked LM's root mounts: the word embeddings and the head the model returns (``get_input_embeddings``,
    ``get_output_embeddings``), their siblings by BERT's names (positions, token types, the embeddings' norm, the
    head's transform)."""
    mounts = {}
    for module, standard, siblings in ((model.get_input_embeddings(), "embed_tokens", EMBEDDINGS),
                                       (model.get_output_embeddings(), "lm_head", HEAD)):
        path = next((p for p, m in model.named_modules() if m is module), None) if module is not None else None
        if not path or path.startswith(f"{standard}."):
            continue  # none, or inside a module of the standard name already (RoBERTa's lm_head.decoder)
        mounts[path] = standard
        parent_path = path.rpartition(".")[0]
        parent = model.get_submodule(parent_path) if parent_path else model
        for name, _ in parent.named_children():
            if name in siblings and siblings[name] not in mounts.values():
                mounts[f"{parent_path}.{name}".lstrip(".")] = siblings[name]
    return mounts


def _lens(kind: str) -> dict[str, Any]:
    """The lens's step past the last block of ``kind``'s reference family (bert's, bart's, whisper's)."""
    from nncanon.parts.encoders import embeddings, seq2seq, speech

    return {"masked LM": {"before_the_head": embeddings.before_the_head},
            "seq2seq": {"past_the_head": seq2seq.past_the_head},
            "speech-to-text": {"before_the_head": speech.decoder_norm}}.get(kind, {})


def family_module(model_type: str, kind: str, model: Any) -> tuple[types.ModuleType, list[str]]:
    """A family module over ``kind``'s parts on ``model`` (nncanon.families' contract), and the tree's shape."""
    from nncanon.parts.blocks.decoder import attention_layer_types, nothing_to_prepare

    _, _, root = _parts(kind)
    rename, envoys, paths, shape = mount(model, kind)
    name = f"nncanon_survey_{model_type.replace('-', '_')}"
    module = types.ModuleType(name, f"the survey's {kind} parts on {model_type}")
    module.FAMILY, module.MODEL_TYPES = f"{model_type} (survey)", (model_type,)
    module.__file__ = __file__  # where its RENAME was guessed, as a wrap's error names a family's file
    module.TEXT_TASK = "feature-extraction"  # an encoder's load: its preprocessing only tokenizes
    module.RENAME, module.ENVOYS = rename, envoys
    module.ROOT = root("SurveyEncoderModel", module)
    module.required_paths = lambda model: list(paths)
    module.dim_sizes = lambda model: {}
    module.layer_types = attention_layer_types
    module.prepare = nothing_to_prepare
    module.STACKS = ("encoder", "decoder") if "decoder" in _parts(kind)[0] else None  # the chain orders the two
    for hook, step in _lens(kind).items():  # what the lens applies past the last block, as the kind's family does
        setattr(module, hook, step)
    sys.modules[name] = module  # a host's family_module must be importable by name
    return module, shape


def config(model_type: str, kind: str) -> Any:
    """The decoder survey's tiny config, its speech front end shrunk too (``SPEECH_SIZES``)."""
    config = tiny_config(model_type)
    if kind == "CTC" and getattr(config, "vocab_size", 0) is None:  # a CTC head's letters: none by default
        config.vocab_size = VOCAB
    if kind in ("speech-to-text", "CTC"):
        for name, size in SPEECH_SIZES.items():
            value = getattr(config, name, None)
            if isinstance(value, (list, tuple)):
                setattr(config, name, type(value)([size] * len(value)))
            elif isinstance(value, int) and not isinstance(value, bool):
                setattr(config, name, size)
    return config


def _ids(rows: int, seq: int, offset: int = 11) -> Any:
    import torch

    return (torch.arange(rows * seq).reshape(rows, seq) * 37 + offset) % (VOCAB - 8) + 4


def _pair(rows: int, seq: int) -> Any:
    import torch

    types = torch.zeros(rows, seq, dtype=torch.long)
    types[:, seq // 2:] = 1
    return types


def _padding(rows: int, seq: int) -> Any:
    import torch

    mask = torch.ones(rows, seq, dtype=torch.long)
    mask[-1, seq - PADDED:] = 0
    return mask


def feature_extractor(model_type: str, model: Any) -> Any:
    """The type's own feature extractor, from its class's defaults sized to the config (nothing downloaded)."""
    from transformers.models.auto.feature_extraction_auto import (
        FEATURE_EXTRACTOR_MAPPING_NAMES,
        feature_extractor_class_from_name,
    )

    name = FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type)
    cls = feature_extractor_class_from_name(name) if name else None
    if cls is None:
        raise NoFrontEnd(f"transformers names no feature extractor for {model_type}")
    config = model.config
    size = getattr(config, "input_feat_per_channel", None) or getattr(config, "num_mel_bins", None)
    taken = inspect.signature(cls.__init__).parameters
    # the width the model's front end takes, by each name an extractor spells it
    return cls(**{name: size for name in ("feature_size", "num_mel_bins") if size and name in taken})


def tones(rate: int, rows: int = ROWS, samples: int = SAMPLES) -> list[Any]:
    """``rows`` fixed tones, 220 Hz apart (speech.clips' clip, at a length the tiny model's front end takes)."""
    import torch

    seconds = torch.arange(samples) / rate
    return [(0.5 * torch.sin(2 * math.pi * (440 + 220 * row) * seconds)).numpy() for row in range(rows)]


def inputs(model_type: str, kind: str, model: Any) -> tuple[tuple, dict]:
    """What ``kind`` is called with: ids and a padded mask (masked LM), with decoder ids (seq2seq), features or raw
    values from the type's feature extractor (speech-to-text, CTC)."""
    if kind in ("masked LM", "seq2seq"):
        kwargs = {"input_ids": _ids(ROWS, SEQ), "attention_mask": _padding(ROWS, SEQ)}
        if kind == "masked LM" and "token_type_ids" in inspect.signature(model.forward).parameters and \
                (getattr(model.config, "type_vocab_size", 0) or 0) > 1:
            kwargs["token_type_ids"] = _pair(ROWS, SEQ)  # a text pair: the first half type 0, the second type 1
        if kind == "seq2seq":
            kwargs["decoder_input_ids"] = _ids(ROWS, SEQ - 1, offset=5)
        return (), kwargs
    extractor = feature_extractor(model_type, model)
    rate = getattr(extractor, "sampling_rate", 16000)
    features = dict(extractor(tones(rate), sampling_rate=rate, return_tensors="pt"))
    decoder = {} if kind == "CTC" else {"decoder_input_ids": _ids(ROWS, SEQ - 1, offset=5)}
    # what the forward takes of what the extractor gives: log-mel features (Whisper's) by name, or the samples
    # (wav2vec2's), the forward's first argument, positionally: nnsight batches a float tensor there as raw features
    taken = inspect.signature(model.forward).parameters
    if "input_features" in taken and "input_features" in features:
        return (), {"input_features": features["input_features"], **decoder}
    if "input_values" in taken and "input_values" in features:
        return (features["input_values"],), decoder
    raise NoFrontEnd(f"{type(extractor).__name__} gives {', '.join(features)}, which {type(model).__name__}.forward "
                    "does not take")


def forward(model: Any, args: tuple, kwargs: dict) -> dict:
    """One forward; a seq2seq call's decoder ids left to the model where it makes them itself (BART shifts the
    source ids, which a root relation states): the ``kwargs`` the forward ran on."""
    bare = {k: v for k, v in kwargs.items() if k != "decoder_input_ids"}
    if bare != kwargs and "input_ids" in kwargs:
        try:
            model(*args, **bare)
            return bare
        except Exception:  # noqa: BLE001  (a model that needs the decoder ids: T5's; they are passed below)
            pass
    model(*args, **kwargs)
    return kwargs


def survey(model_type: str, kind: str, cls: type) -> dict:
    """The facts of one model type of ``kind`` on its parts: the row ``measure.survey`` writes for a decoder."""
    import torch

    from generator.survey.kinds import kinds_of
    from generator.survey.measure import check_relations, missing_ops_unavailable, read_values
    from nncanon.core.model import wrap

    facts: dict[str, Any] = {"model_type": model_type, "class": cls.__name__, "kind": kind, "builds": False,
                             "forwards": False, "wraps": False, "failure": None, "values": {}, "relations": {},
                             "chain": None, "shape": [], "tasks": kinds_of(model_type)}
    parts = hosts(kind)
    with warnings.catch_warnings(), budget(BUDGET_S):
        warnings.simplefilter("ignore")
        try:
            model = build(model_type, cls, config(model_type, kind))
            facts["builds"] = True
            args, kwargs = inputs(model_type, kind, model)
            with torch.no_grad():
                kwargs = forward(model, args, kwargs)
            facts["forwards"] = True
            module, facts["shape"] = family_module(model_type, kind, model)
            with missing_ops_unavailable(), quiet_transformers():
                standard = wrap(module, model, "text-generation")
            facts["wraps"] = True
            facts["values"] = read_values(standard, args, kwargs, parts)
            weights: dict[str, str | None] = {}
            facts["relations"] = check_relations(standard, args, kwargs, facts["values"], weights, parts)
            held = {key for key, why in {**facts["relations"], **weights}.items() if why is None}
            facts["chain"] = chain(standard, args, kwargs, held, facts["values"])
        except (Exception, OverBudget) as error:  # any failure is the answer for this model type, in one line
            facts["failure"] = one_line(error)
            if isinstance(error, OUTSIDE_THE_KEY):
                facts["retry"] = True
    return facts


