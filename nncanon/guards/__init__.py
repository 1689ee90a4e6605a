"""The guards and their messages: a wrong read, edit or name refused in standard names (``errors``, ``missing``,
``readonly``, ``stale``, ``order``), the other libraries' names (``other_names``), the verified transformers
releases (``releases``) and a damaged checkpoint in one line (``checkpoint_errors``)."""
