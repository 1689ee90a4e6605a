"""The core: the value model (a value, where it is read, the host that carries it, its layout and view, the
relations that state it, the float32 error model) and the model built on it (``StandardModel``, loading,
building a family's module, the cache, inputs and processors, kernels' routes, NDIF runs).

Nothing here is named for users: the public API is ``nncanon/__init__.py``."""
