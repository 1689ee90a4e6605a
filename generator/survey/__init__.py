"""The survey, between the facts and the site: every transformers causal-LM and image-text-to-text model type.

In: transformers' own lists of model types and their config classes, the generic parts (``nncanon.parts``:
the Llama tree's block, attention, MLP and root values, with their relations) and the facts stage's reader
(``generator.facts.proof``). Out: one JSON per model type in ``<build>/survey/`` (``run``), cached under a key
of the releases and this code: does its config class build tiny (``shrink``), does it run, where the
generic parts sit on its tree (``tree``), which values resolve and which relations hold there
(``measure``); and ``index.json``, the types of the last whole survey and the model types with a family
page. The site's Coverage page (``generator.site.coverage``) is rendered from these alone.
"""
