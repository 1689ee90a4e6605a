"""mkdocs hook (mkdocs.yml `hooks:`): list every rendered family page under Families in the nav.

The family pages are generated (generator/render.py writes docs/families/<family>.md), so the nav in
mkdocs.yml cannot name them; this adds them, sorted, after families/index.md. No torch here.
"""

import re
from pathlib import Path


def on_config(config):
    pages = sorted(p.name for p in (Path(config.docs_dir) / "families").glob("*.md") if p.name != "index.md")
    for item in config.nav or []:
        if isinstance(item, dict) and "Families" in item:
            item["Families"] = ["families/index.md"] + [{p[: -len(".md")]: f"families/{p}"} for p in pages]
    return config


# ---------------------------------------------------------------- 404.html, wherever the site is copied
#
# Without site_url, mkdocs writes 404.html with root-absolute URLs ("/assets/...", "/families/"), since
# a server shows that page for a missing URL at any depth, where relative ones would not resolve. Under
# a sub-path ("https://host/docs/") those point outside the site. So: the URLs become relative to a
# <base> that a script at the top of <head> sets to the site's root, found by asking the server, from
# the page's own directory up, for a file every build has (a HEAD request each, a few at most).
# Material's own config (its base and search worker) is moved to that root before its bundle reads it.

_ROOT_ABSOLUTE = re.compile(r'(\s(?:href|src)=")/(?!/)([^"]*)"')
_FIND_ROOT = (
    "<script>(function(){var d=location.pathname.replace(/[^/]*$/,'');"
    "for(var n=0;n<12;n++){try{var x=new XMLHttpRequest();x.open('HEAD',d+'assets/nncanon.css',false);"
    "x.send();if(x.status===200)break}catch(e){}if(d==='/')break;d=d.replace(/[^/]*\\/$/,'')}"
    "var b=document.createElement('base');b.href=d;document.head.appendChild(b)})()</script>"
)
_MOVE_CONFIG = (
    "<script>(function(){var c=document.getElementById('__config');if(!c)return;var j=JSON.parse(c.textContent);"
    "j.base=new URL('.',document.baseURI).href;"
    "if(j.search)j.search=new URL(j.search.replace(/^\\//,''),document.baseURI).href;"
    "c.textContent=JSON.stringify(j)})()</script>"
)


def relocatable_404(html: str) -> str:
    """404.html with its root-absolute URLs made relative to the site's root, found where it is served."""
    html = _ROOT_ABSOLUTE.sub(lambda m: f'{m.group(1)}./{m.group(2)}"', html)
    html = html.replace("<head>", "<head>" + _FIND_ROOT, 1)
    html = html.replace('__md_scope=new URL("/",location)', '__md_scope=new URL(".",document.baseURI)', 1)
    head, sep, rest = html.partition('<script id="__config"')
    if sep:
        end = rest.index("</script>") + len("</script>")
        html = head + sep + rest[:end] + _MOVE_CONFIG + rest[end:]
    return html


def on_post_template(output_content, template_name, config):
    if template_name == "404.html" and not config.site_url:
        return relocatable_404(output_content)
    return output_content
