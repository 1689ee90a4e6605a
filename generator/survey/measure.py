"""One model type surveyed: built tiny, run once, wrapped on the generic parts, its values and relations measured.

The facts are what a contributor needs to start a family: does the config class build, does the model run
on a six-token prompt, which of the generic hosts' standard values resolve on it (read in a trace, a tensor
back), and which of their relations hold (each computed on the model by the module's own math and
compared with the read values within its float32 tolerance, ``nncanon/core/precision.py``). Only names,
booleans and one-line reasons are kept, never a measured number: the facts are the same under every
``ATEN_CPU_CAPABILITY``.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

from generator.survey.failures import one_line  # noqa: F401 (the rows' importers read it here)
from generator.survey.shrink import BATCH, SEQ, VOCAB, tiny_config
from generator.survey.structure import structure

#: relations the survey does not check: the mask relation reads the tokenizer's pad token, and the survey
#: runs on token ids with no tokenizer and no padding
SKIPPED = ("attention_mask == the batch's mask",)
#: the seed of every survey model's weights (tiny_weights' draws, the same bits on every CPU)
SEED = 0
#: a vector the model's init draws at random and tiny_weights has no rule for (a family recipe must name
#: one): the survey draws it in this range, a spread like a norm's or a bias's noise, so it neither vanishes
#: nor saturates
UNRULED = (-0.5, 0.5)
#: the most parameters a shrunk model may keep: the recipes' tiny models have under 1M; more means a size
#: field the shrink table does not know kept its full default (a vision tower's convolutions, a hash
#: embedding). The cost is the draw: tiny_weights draws 2 to 8 million parameters a CPU-second (RoCBert's 13.7M
#: shrunk took 6.8 CPU-s, MuseGlimmer's 17.7M 2.2), so 20M is at most 10 CPU-s, under a sixth of BUDGET_S;
#: a model past it (BLT's 193M hash embedding) would spend the budget drawing, and is reported instead
MAX_PARAMETERS = 20_000_000
#: seconds one model type may take, built, run and measured (a tiny one takes about one): a model whose
#: forward loops far longer on six tokens is reported, not waited for
BUDGET_S = 60


class TooLarge(ValueError):
    """The shrunk config still builds a model too large to survey."""


class OverBudget(TimeoutError):
    """One model type took longer than the survey gives it."""


#: failures whose cause the row's cache key cannot see: an optional package not installed (a config or model
#: class importing it), the machine's load (the time budget), its memory, a file it could not read. Installing the
#: package or rerunning on a quiet machine changes the answer, so such a row is not kept as the type's answer
OUTSIDE_THE_KEY = (ImportError, OverBudget, MemoryError, OSError)


@contextlib.contextmanager
def budget(seconds: int):
    import signal

    def stop(signum, frame):
        raise OverBudget(f"stopped after {seconds} s (a tiny model takes about one)")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def tasks(model_type: str) -> list[str]:
    """Which of transformers' lists (kinds.KINDS) the model type is on."""
    from generator.survey.kinds import kinds_of

    return kinds_of(model_type)


def model_class(model_type: str) -> type:
    import transformers
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) or MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES[model_type]
    return getattr(transformers, name)


def _one_key_head_per_query(model_type: str, model: Any, first: Exception) -> tuple[Any, tuple, dict]:
    """A forward that failed with fewer key heads than query heads, run with one per query head (an attention that
    repeats no keys, Unlimited-OCR's); else the first failure stands."""
    import torch

    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(text, "num_key_value_heads", None) in (None, getattr(text, "num_attention_heads", None)):
        raise first
    model = build(model_type, key_per_query=True)
    args, kwargs = inputs_for(model)
    try:
        with torch.no_grad():
            model(**kwargs)
    except Exception:
        raise first from None
    return model, args, kwargs


def own_config(cls: type, config: Any) -> Any:
    """The config ``cls`` is built from, as ``AutoModelForCausalLM.from_config`` picks it: a causal LM whose
    config class is a sub-config of the model type's (Qwen 3.5's text model, MusicGen's decoder) gets that one."""
    wanted = getattr(cls, "config_class", None)
    if wanted is None or isinstance(config, wanted):
        return config
    for name in getattr(type(config), "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if isinstance(sub, wanted):
            sub._attn_implementation = "eager"
            return sub
    return config


def builds_unshrunk(model_type: str) -> bool:
    """Whether the config class's own defaults, not shrunk, build the model (on the meta device: sized, never
    allocated). Where they do not, a build failure is the class's, not the shrink's."""
    import torch
    from transformers import CONFIG_MAPPING

    try:
        with torch.device("meta"):
            cls = model_class(model_type)
            cls(own_config(cls, CONFIG_MAPPING[model_type]()))
    except Exception:
        return False
    return True


def build(model_type: str, cls: type | None = None, config: Any = None, key_per_query: bool = False) -> Any:
    """The tiny model, float32, every parameter drawn from SHAKE-256 as the family recipes' are; ``cls`` and
    ``config``: another task's class and a config shrunk further (the encoder survey's, generator/survey/encoders.py);
    ``key_per_query``: shrink.tiny_config's."""
    import torch

    from generator.checkpoint import tiny_weights

    torch.manual_seed(SEED)  # decides only which vectors the init leaves constant
    cls = model_class(model_type) if cls is None else cls
    if config is None:
        config = own_config(cls, tiny_config(model_type, key_per_query=True) if key_per_query else tiny_config(model_type))
    with torch.device("meta"):  # sized first, for nothing
        sizes = {name: p.numel() for name, p in cls(config).named_parameters()}
    if sum(sizes.values()) > MAX_PARAMETERS:
        largest = max(sizes, key=sizes.get)
        raise TooLarge(f"the shrunk config still has {sum(sizes.values()):,} parameters ({largest}: "
                       f"{sizes[largest]:,}); a size field the survey's shrink table does not know")
    with torch.device("cpu"):
        model = cls(config).to(torch.float32).eval()
    modules = dict(model.named_modules())
    with torch.no_grad():
        for name, param in model.named_parameters():
            try:
                values = tiny_weights.draw(SEED, name, param, modules[name.rpartition(".")[0]])
            except tiny_weights.InitRuleMissing:
                values = tiny_weights.uniform(SEED, name, param.numel(), *UNRULED).astype("float32")
            param.copy_(torch.from_numpy(values.reshape(tuple(param.shape))))
    return model


def inputs() -> tuple[tuple, dict]:
    """Six token ids, no padding: the trace arguments every survey read uses."""
    import torch

    ids = (torch.arange(BATCH * SEQ).reshape(BATCH, SEQ) * 37 + 11) % VOCAB
    return (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def inputs_for(model: Any, image: bool = False, positions: bool = False) -> tuple[tuple, dict]:
    """`inputs`, and what this model's forward cannot run without: no cache (a six-token forward needs none, and
    a seq2seq decoder's or a hybrid's cache is what fails on one: Blenderbot's cross-attention layers, Bailing's
    linear-only cache), an image for a captioner whose forward requires ``pixel_values`` (BLIP; any model that
    takes them with ``image``), the Q-Former's own ids (InstructBLIP's, the prompt's), the prompt as the decoder's
    ids of an encoder-decoder (T5Gemma 2), with ``positions`` the prompt's positions 0..5 (an unpadded prompt's
    default). Any other required argument is left out: the forward says which."""
    import inspect

    import torch

    args, kwargs = inputs()
    params = inspect.signature(model.forward).parameters
    if "use_cache" in params:
        kwargs["use_cache"] = False
    config = model.config
    vision = getattr(config, "vision_config", None) or config
    if positions and "position_ids" in params:
        kwargs["position_ids"] = torch.arange(SEQ).expand(BATCH, SEQ)
    if "decoder_input_ids" in params:
        kwargs["decoder_input_ids"] = kwargs["input_ids"]
    for name, param in params.items():
        if name in kwargs or (param.default is not inspect.Parameter.empty and not (image and name == "pixel_values")):
            continue
        if name == "pixel_values":
            side = getattr(vision, "image_size", 28)
            side = side[0] if isinstance(side, (list, tuple)) else side
            shape = (BATCH, getattr(vision, "num_channels", 3), side, side)
            # a fixed ramp in [-0.5, 0.5): an image whose value depends on nothing but its shape
            kwargs[name] = (torch.arange(math.prod(shape), dtype=torch.float32) % 17 / 17 - 0.5).reshape(shape)
        elif name == "qformer_input_ids":
            kwargs[name] = kwargs["input_ids"]
            kwargs["qformer_attention_mask"] = kwargs["attention_mask"]
    return args, kwargs


@contextlib.contextmanager
def missing_ops_unavailable():
    """A value whose op the module does not have is unavailable, not an error in the family module: the
    survey asks which values an unknown tree serves, and "none there" is the answer (as nncanon says
    under a release outside the verified range, `StandardModel._install_sources`)."""
    from nncanon.guards import releases

    verified, named = releases.verified, releases.named
    releases.verified = lambda release=None: False
    releases.named = lambda: f"transformers {releases.installed()}"  # the release is not why: the tree is
    try:
        yield
    finally:
        releases.verified, releases.named = verified, named


@contextlib.contextmanager
def quiet_transformers():
    """transformers' log held to critical errors while the survey wraps: its pipeline lists every causal-LM
    class when a multimodal one is wrapped for text generation, a paragraph per model type that says nothing."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity(hf_logging.CRITICAL)
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def survey(model_type: str) -> dict:
    """The facts of one model type: how far it got, and what holds on it."""
    import torch

    from generator.survey.chain_gap import chain
    from generator.survey.reasons import reason
    from generator.survey.tree import NoTree, discover, family_module
    from nncanon.core.model import wrap

    facts: dict[str, Any] = {"model_type": model_type, "class": None, "builds": False, "forwards": False,
                             "wraps": False, "failure": None, "reason": None, "values": {}, "relations": {},
                             "chain": None, "shape": [],
                             "tasks": tasks(model_type)}
    with warnings.catch_warnings(), budget(BUDGET_S):
        warnings.simplefilter("ignore")
        try:
            facts["class"] = model_class(model_type).__name__
            model = build(model_type)
            facts["builds"] = True
            args, kwargs = inputs_for(model)
            try:
                with torch.no_grad():
                    model(**kwargs)
            except Exception as first:
                # once more with what a failing forward may lack: the image it names (a captioner's pixel_values), the
                # prompt's positions (Qwen-Omni's thinker derives them from config ids its defaults lack)
                image = "pixel_values" in str(first) and "pixel_values" not in kwargs
                args, kwargs = inputs_for(model, image=image, positions=True)
                try:
                    with torch.no_grad():
                        model(**kwargs)
                except Exception:
                    if image:
                        raise  # the failure of the image it asked for
                    model, args, kwargs = _one_key_head_per_query(model_type, model, first)
            facts["forwards"] = True
            tree = discover(model)
            facts["shape"] = structure(tree, model, kwargs)
            with missing_ops_unavailable(), quiet_transformers():
                standard = wrap(family_module(model_type, tree), model, "text-generation")
            facts["wraps"] = True
            facts["values"] = read_values(standard, args, kwargs)
            weights: dict[str, str | None] = {}
            facts["relations"] = check_relations(standard, args, kwargs, facts["values"], weights)
            # the relations that held must join into one chain, as a family page's must (generator/facts/chain.py):
            # a mixer the generic parts do not describe breaks it even where each relation holds
            held = {key for key, why in {**facts["relations"], **weights}.items() if why is None}
            facts["chain"] = chain(standard, args, kwargs, held, facts["values"])
        except (Exception, NoTree, OverBudget) as error:  # any failure is the answer for this model type, in one line
            facts["failure"] = one_line(error)
            stage = next((stage for flag, stage in (("builds", "build"), ("forwards", "run"), ("wraps", "wrap"))
                          if not facts[flag]), "measure")
            facts["reason"] = reason(error, stage, BUDGET_S, stage == "build" and not builds_unshrunk(model_type))
            if isinstance(error, OUTSIDE_THE_KEY):
                facts["retry"] = True  # run.py's: the row is shown, and surveyed again next time
    return facts


def _kinds(model: Any, hosts: list | None = None) -> list[tuple[str, Any]]:
    """(host path pattern, first envoy) of every host kind, the root first (``hosts``: the parts surveyed, default
    the decoder's, tree.generic_hosts)."""
    from generator.facts.proof import envoys, pattern
    from generator.survey.tree import generic_hosts

    generic = {path for path, _ in hosts or generic_hosts()}
    seen: dict[str, Any] = {}
    for envoy in envoys(model):
        if pattern(envoy._std_path) not in generic:
            continue  # a generic host mounted elsewhere too (a vision block's attention): not the text stack's
        seen.setdefault(f"{pattern(envoy._std_path)}:{type(envoy).__name__}", envoy)
    return [(key.split(":")[0], envoy) for key, envoy in seen.items()]


def _read(model: Any, wanted: dict, args: tuple, kwargs: dict) -> dict:
    """Every read of ``wanted`` in one forward; where that fails, each half again (one read that cannot be made
    fails the forward it shares), down to the reads that fail, each kept as its exception."""
    from generator.facts.proof import read_all

    try:
        return read_all(model, wanted, args, kwargs)
    except Exception as error:
        if len(wanted) == 1:
            return {key: error for key in wanted}
    keys = list(wanted)
    half = len(keys) // 2
    return {**_read(model, {k: wanted[k] for k in keys[:half]}, args, kwargs),
            **_read(model, {k: wanted[k] for k in keys[half:]}, args, kwargs)}


def not_served(model: Any, envoy: Any, attr: str) -> str | None:
    """Why ``envoy`` cannot serve ``attr`` before any forward: a condition of the load, an op its module does
    not have, a child module its locator reads that the tree does not have (a read would fail the forward
    it shares with every other read)."""
    from generator.facts.proof import MODULE_IO, unavailable
    from nncanon.core.hosts import Host

    if attr in MODULE_IO:
        return None
    if not isinstance(envoy, Host):
        return f"{envoy.path} is not a host of the generic parts"
    why = unavailable(model, envoy, attr) or model.missing_op(type(envoy), attr)
    if why:
        return str(why)
    value = next(v for v in type(envoy).values() if v.name == attr)
    if value.locator.module is not None:
        try:
            envoy.get(value.locator.module)
        except AttributeError:
            return f"{type(envoy._module).__name__} has no module {value.locator.module}"
    return None


def read_values(model: Any, args: tuple, kwargs: dict, hosts: list | None = None) -> dict[str, str | None]:
    """``"host.value" -> None`` (it resolves: the read gives a tensor) or why not, for every value of the
    generic hosts (a host the tree has no module for: all of its values say so)."""
    import torch

    from generator.facts.proof import path_of
    from generator.survey.tree import generic_values

    results: dict[str, str | None] = {key: "no module mounted for this host" for key in generic_values(hosts)}
    wanted = {}
    for host, envoy in _kinds(model, hosts):
        for value in type(envoy).values():
            key = f"{host}.{value.name}"
            why = not_served(model, envoy, value.name)
            if why:
                results[key] = why
            else:
                wanted[(path_of(envoy), value.name)] = envoy
    at = {path_of(envoy): host for host, envoy in _kinds(model, hosts)}
    for (path, name), read in _read(model, wanted, args, kwargs).items():
        key = f"{at[path]}.{name}"
        if isinstance(read, BaseException):
            results[key] = one_line(read)
        elif isinstance(read, torch.Tensor) or (isinstance(read, list) and name == "input_size"):
            results[key] = None
        else:
            results[key] = f"read {type(read).__name__}, not a tensor"
    return dict(sorted(results.items()))


def check_relations(model: Any, args: tuple, kwargs: dict, values: dict[str, str | None],
                    weights: dict[str, str | None] | None = None, hosts: list | None = None) -> dict[str, str | None]:
    """``"host: relation" -> None`` (it holds on every envoy of the host) or why not, for every relation of
    the generic hosts the tree mounts. Computed by the relation's own code on the values read; a term that is
    a value which did not resolve (``values``, from `read_values`) is not read again. ``weights``: the relations
    that prove the weights (nncanon/parts/weights.py) checked too, their results put there (the chain needs them;
    the page's counts are the hosts' own)."""
    from generator.facts.proof import envoys, mixer_of, path_of, pattern, targets
    from generator.survey.tree import generic_hosts, generic_relations
    from nncanon.core.relations import error as relative_error
    from nncanon.parts.weights import relations as weight_relations

    results: dict[str, str | None] = {key: "no module mounted for this host"
                                      for key in generic_relations(SKIPPED, hosts)}
    failed: dict[str, str] = {}  # a relation holds only where it holds on every envoy: its first failure stays
    plan = []
    weight_keys: set[str] = set()
    generic = {path for path, _ in hosts or generic_hosts()}
    for envoy in envoys(model):
        host = pattern(envoy._std_path)
        if host not in generic:
            continue
        own = [(f"{host}: {r.text}", r.on(mixer_of(envoy))) for r in getattr(type(envoy), "RELATIONS", ())
               if not r.text.startswith(SKIPPED)]
        try:  # a guessed tree's weights may not map: then they prove nothing here
            extra = [(f"{host}: {r.text}", r) for r in weight_relations(envoy)] if weights is not None else []
        except Exception:
            extra = []
        weight_keys |= {key for key, _ in extra} - {key for key, _ in own}
        for key, relation in own + extra:
            if "{mixer}" in relation.text:
                failed.setdefault(key, "the block has no attention to mount as self_attn")
                continue
            try:
                terms = {term: targets(model, envoy, term) for term in relation.reads}
            except (AttributeError, IndexError) as error:
                failed.setdefault(key, f"a term does not resolve: {one_line(error)}")
                continue
            why = next((w for found, attr, _ in terms.values() for e in found
                        if (w := not_served(model, e, attr) or values.get(f"{pattern(path_of(e))}.{attr}"))), None)
            if why:
                failed.setdefault(key, f"not served: {why}")
                continue
            plan.append((key, envoy, relation, terms))
    wanted = {(path_of(t), attr): t for *_, terms in plan for found, attr, _ in terms.values() for t in found}
    read = _read(model, wanted, args, kwargs)
    for key, envoy, relation, terms in plan:
        if key in failed:
            continue
        reads, broken = {}, None
        for term, (found, attr, many) in terms.items():
            got = [read[(path_of(t), attr)] for t in found]
            broken = broken or next((g for g in got if isinstance(g, BaseException)), None)
            reads[term] = got if many else got[0]
        if broken is not None:
            failed[key] = f"cannot be read: {one_line(broken)}"
            continue
        try:
            pairs = relation.compute(envoy, reads)
            worst = max((relative_error(computed, got) for computed, got in pairs), default=0.0)
        except Exception as error:
            failed[key] = f"cannot be computed: {one_line(error)}"
            continue
        # the relation's own float32 tolerance (nncanon/core/precision.py), as the family pages' build uses it
        if worst > relation.tolerance:
            failed[key] = "does not hold"
        else:
            results[key] = None
    results.update(failed)
    for key in weight_keys:  # the weights' relations apart: the page counts the generic hosts' own
        weights[key] = results.pop(key, "not checked")
    return dict(sorted(results.items()))
