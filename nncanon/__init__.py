"""nncanon: a standard, documented name for every internal of a Hugging Face transformer.

    import nncanon
    model = nncanon.load("path/to/checkpoint")
    with model.trace("The cat sat"):
        logits = model.layers[1].mlp.router_logits.save()
"""

from .errors import ReadOrderError, ShapeMismatch
from .families import CheckpointError, UnsupportedModelType
from .grads import NoGradient
from .hosts import HostKind
from .kernels import route_kernels
from .loading import from_config, load
from .model import FamilyMismatch, ImplementationError, MissingOp, StandardModel, Support, wrap
from .readonly import ReadOnly
from .remote import NotRemotable
from .values import NotOnHost, Unavailable

__version__ = "0.1.0"

__all__ = ["load", "from_config", "wrap", "route_kernels", "StandardModel", "Support", "HostKind", "Unavailable",
           "NotOnHost", "ReadOnly", "FamilyMismatch", "MissingOp", "ImplementationError", "CheckpointError",
           "NotRemotable", "UnsupportedModelType", "ReadOrderError", "ShapeMismatch", "NoGradient", "__version__"]
