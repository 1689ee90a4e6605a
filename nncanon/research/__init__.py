"""The research tools over the standard values: the weights as views (``weights``, ``gathered``, ``norm_forms``),
the lens (``lens``), the residual stream's decomposition (``decompose``), SAEs (``sae``, ``sae_jumprelu``) and
gradients through views (``grads``). ``nncanon/__init__.py`` names the public ones (``nncanon.weights``,
``nncanon.lens``, ``nncanon.sae``, ...)."""
