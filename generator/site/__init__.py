"""Stage 5, the site: pages rendered from the facts JSON, and the mkdocs site built from them.

In: the facts JSON files (and the TransformerLens check's JSON). Out: ``docs/`` markdown (``render``:
family pages, diagrams, support tables, printouts, the families index) and the built site
(``mkdocs_run``), whose every HTML page is checked for a script, handler or URL no template put there
(``html_guard``). Nothing here imports torch or the library: a page says only what the facts say.
"""
