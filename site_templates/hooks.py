"""mkdocs hook (mkdocs.yml `hooks:`): list every rendered family page under Families in the nav.

The family pages are generated (generator/render.py writes docs/families/<family>.md), so the nav in
mkdocs.yml cannot name them; this adds them, sorted, after families/index.md. No torch here.
"""

from pathlib import Path


def on_config(config):
    pages = sorted(p.name for p in (Path(config.docs_dir) / "families").glob("*.md") if p.name != "index.md")
    for item in config.nav or []:
        if isinstance(item, dict) and "Families" in item:
            item["Families"] = ["families/index.md"] + [{p[: -len(".md")]: f"families/{p}"} for p in pages]
    return config
