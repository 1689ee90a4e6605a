"""nncanon: a standard, documented name for every internal of a Hugging Face transformer.

    import nncanon
    model = nncanon.load("path/to/checkpoint")
    with model.trace("The cat sat"):
        logits = model.layers[1].mlp.router_logits.save()

This file is the one place the public API is named. The package's folders are its layers: ``core/`` (the value
model, the model and its loading), ``research/`` (weights, the lens, decomposition, SAEs, gradients), ``guards/``
(wrong reads and edits refused in standard names, the verified releases), ``parts/`` (the shared mechanisms, by
kind) and ``families/`` (one module per family, data over the parts).
"""

import sys

from .core import hubcache, precision
from .core.hosts import HostKind
from .core.kernels import route_kernels
from .core.loading import from_config, load
from .core.model import FamilyMismatch, ImplementationError, MissingOp, StandardModel, Support, wrap
from .core.remote import NotRemotable
from .core.values import NotOnHost, Unavailable
from .families import CheckpointError, UnsupportedModelType
from .guards import errors, releases, stale
from .guards.errors import ReadOrderError, ShapeMismatch
from .guards.readonly import ReadOnly
from .guards.unsaved import NotSavedError
from .research import decompose, grads, lens, sae, sae_jumprelu, weights
from .research.grads import NoGradient

__version__ = "0.1.0"

#: the modules users import by their public name (``from nncanon.sae import TopKSAE``, ``nncanon.lens.unembed``,
#: ``from nncanon import weights``): each lives in its layer's folder and is a submodule of ``nncanon`` under its
#: public name too, so the imports the docs teach, and users wrote before the layers had folders, resolve
PUBLIC_MODULES = {"weights": weights, "lens": lens, "decompose": decompose, "sae": sae, "sae_jumprelu": sae_jumprelu,
                  "grads": grads, "errors": errors, "stale": stale, "releases": releases, "precision": precision,
                  "hubcache": hubcache}
for _name, _module in PUBLIC_MODULES.items():
    sys.modules.setdefault(f"{__name__}.{_name}", _module)
del _name, _module

__all__ = ["load", "from_config", "wrap", "route_kernels", "StandardModel", "Support", "HostKind", "Unavailable",
           "NotOnHost", "ReadOnly", "FamilyMismatch", "MissingOp", "ImplementationError", "CheckpointError",
           "NotRemotable", "UnsupportedModelType", "ReadOrderError", "ShapeMismatch", "NoGradient", "NotSavedError",
           "__version__",
           *PUBLIC_MODULES]
