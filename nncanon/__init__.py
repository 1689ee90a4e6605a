"""nncanon: a standard, documented name for every internal of a Hugging Face transformer.

    import nncanon
    model = nncanon.load("path/to/checkpoint")
    with model.trace("The cat sat"):
        logits = model.layers[1].mlp.router_logits.save()
"""

from .core.hosts import HostKind
from .core.kernels import route_kernels
from .core.loading import from_config, load
from .core.model import FamilyMismatch, ImplementationError, MissingOp, StandardModel, Support, wrap
from .core.remote import NotRemotable
from .core.values import NotOnHost, Unavailable
from .families import CheckpointError, UnsupportedModelType
from .guards.errors import ReadOrderError, ShapeMismatch
from .guards.readonly import ReadOnly
from .research.grads import NoGradient

__version__ = "0.1.0"

__all__ = ["load", "from_config", "wrap", "route_kernels", "StandardModel", "Support", "HostKind", "Unavailable",
           "NotOnHost", "ReadOnly", "FamilyMismatch", "MissingOp", "ImplementationError", "CheckpointError",
           "NotRemotable", "UnsupportedModelType", "ReadOrderError", "ShapeMismatch", "NoGradient", "__version__"]
