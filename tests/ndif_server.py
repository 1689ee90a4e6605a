"""What an NDIF server does with a request, run in a process where nncanon cannot be imported.

``python tests/ndif_server.py REQUEST_JSON BLOB RESULT`` reads the request envelope (``RequestModel.metadata()``)
and the payload (``RequestModel.serialize``), then follows nnsight 0.8.1's server-side path: the model is
rebuilt from the envelope's model key (``Remotable.from_model_key(key, dispatch=True)``, as NDIF's local
server loads its model), the payload deserialized against that model's persistent objects
(``RequestModel.deserialize(blob, model._remoteable_persistent_objects(), compress)``, as nnsight's vLLM
server and ``LocalSimulationBackend`` do), the envelope's env applied (``_remoteable_set_env``), and the
block executed inside a trace scope as ``Tracer.__exit__`` runs a backend (``inc``; ``tracer.execute``;
``dec``); the saved values are the ones pushed into the frame's locals, as NDIF's execution backend
collects them, written with ``torch.save`` as the server returns them. The Hugging Face cache comes from
``HF_HOME``; nothing reaches a network.
"""

from __future__ import annotations

import importlib.abc
import json
import sys


class NoNncanon(importlib.abc.MetaPathFinder):
    """The server has nnsight, torch and transformers, not nncanon (nor this repository's other packages)."""

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("nncanon", "generator", "tests"):
            raise ModuleNotFoundError(f"{name} is not installed on the server")
        return None


def main(request_path: str, blob_path: str, result_path: str) -> None:
    sys.meta_path.insert(0, NoNncanon())
    sys.path = [p for p in sys.path if "wt-" not in p and p not in ("", ".")]
    import torch
    from nnsight.modeling.mixins.remotable import Remotable
    from nnsight.schema.request import RequestModel
    from nnsight.tracing.tracer import _saves, dec, inc

    request = RequestModel.model_validate(json.loads(open(request_path).read()))
    model = Remotable.from_model_key(request.model_key, dispatch=True)
    hooks = lambda: sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model._module.modules())  # noqa: E731
    hooks_before = hooks()
    blob = open(blob_path, "rb").read()
    tracer = RequestModel.deserialize(blob, model._remoteable_persistent_objects(), request.compress)
    model._remoteable_set_env(request.env)
    inc()
    try:
        tracer.execute(tracer.info.code)
        saved = _saves()
        saves = {k: v for k, v in tracer.info.frame.f_locals.items() if id(v) in saved}
    finally:
        dec()
    torch.save({"saves": saves, "model_class": type(model).__name__,
                "nncanon_loaded": any(name.split(".")[0] == "nncanon" for name in sys.modules),
                "hooks_left": hooks() - hooks_before}, result_path)


if __name__ == "__main__":
    main(*sys.argv[1:4])
