"""A name assigned inside a trace and used after it without ``.save()``: one line naming it and the fix
(nncanon/guards/unsaved.py), where nnsight leaves Python's bare UnboundLocalError or NameError. The truth of "not
saved" is nnsight's own: the same body with ``.save()`` gives the value, read against a plain forward hook."""

from __future__ import annotations

import runpy

import nnsight
import pytest
import torch

import nncanon
from nncanon import NotSavedError

PROMPT = "The cat sat"


@pytest.fixture(scope="module")
def llama():
    from generator.checkpoint.checkpoints import checkpoint_dir
    from generator.recipe.family import get_family

    return nncanon.load(checkpoint_dir(get_family("llama")))


def _one_line(error: pytest.ExceptionInfo, name: str) -> str:
    text = str(error.value)
    assert "\n" not in text and f"{name!r} was assigned inside the trace but not saved" in text, text
    assert f"{name} = <value>.save()" in text and f"nnsight.save({name})" in text, text
    return text


def test_in_a_function_every_use_names_the_variable_and_the_fix(llama):
    def unsaved():
        with llama.trace(PROMPT):
            hidden = llama.layers[0].layer_output
        return hidden

    hidden = unsaved()
    uses = [lambda: hidden.shape, lambda: hidden[0], lambda: hidden + 1, lambda: print(hidden), lambda: len(hidden),
            lambda: torch.stack([hidden]), lambda: float(hidden), lambda: list(hidden)]
    for use in uses:
        with pytest.raises(NotSavedError) as error:
            use()
        _one_line(error, "hidden")
    assert isinstance(error.value, NameError)  # what a caller catching the bare error catches still
    assert getattr(hidden, "_base", None) is None  # a library's probe finds nothing, as on any object


def test_a_list_built_in_the_trace_and_a_loop_index(llama):
    def unsaved():
        with llama.trace(PROMPT):
            outs = []
            for i in range(2):
                outs.append(llama.layers[i].layer_output)
        return outs, i

    outs, i = unsaved()
    with pytest.raises(NotSavedError) as error:
        outs[0]
    _one_line(error, "outs")
    with pytest.raises(NotSavedError) as error:
        i + 1
    _one_line(error, "i")


def test_saved_names_keep_their_values_and_names_bound_before_keep_theirs(llama):
    seen = {}
    hook = llama._module.model.layers[1].register_forward_hook(lambda m, a, out: seen.update(out=out))

    def saved():
        before = "kept"
        with llama.trace() as tracer:
            with tracer.invoke(PROMPT):
                first = llama.layers[0].layer_output.save()
                second = llama.layers[1].layer_output
                nnsight.save(second)
                before = llama.layers[1].layer_output * 2  # a tensor of its own, unsaved
        return first, second, before

    try:
        first, second, before = saved()
    finally:
        hook.remove()
    out = seen["out"][0] if isinstance(seen["out"], tuple) else seen["out"]
    assert first.shape == second.shape and torch.equal(second, out)
    assert before == "kept"  # nnsight leaves a name bound before the trace as it was; so does the guard


def test_a_script_level_trace(llama, tmp_path):
    """A notebook's or script's scope: the frame's locals are its globals."""
    script = tmp_path / "script.py"
    script.write_text("with llama.trace(PROMPT):\n    h = llama.layers[0].layer_output\n", encoding="utf-8")
    namespace = runpy.run_path(str(script), init_globals={"llama": llama, "PROMPT": PROMPT})
    with pytest.raises(NotSavedError) as error:
        _ = namespace["h"].shape
    _one_line(error, "h")
