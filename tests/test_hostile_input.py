"""Nothing the build is given can delete a user's files or put a script on the site (issue 31).

Every case is a bad input the build or the library was once given: each must end in one ``error:``
line naming the file, field or value and the fix, or be accepted correctly; never a traceback, a
silent accept or lost files. No model is collected: the site cases run at render level on the
fixture facts, the ownership cases stop before anything is written.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from one_line import cli_error as _error

from generator.recipe.family import get_family

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the build writes only where it owns


@pytest.fixture
def users_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "thesis.tex").write_text("\\documentclass{article}\n")
    return mine


def test_a_users_directory_is_refused_as_the_site_and_kept(users_dir, capsys):
    err = _error(capsys, ["build", "--site", str(users_dir)])
    assert str(users_dir) in err and ".nncanon-site" in err
    assert (users_dir / "thesis.tex").read_text() == "\\documentclass{article}\n"


@pytest.mark.parametrize("site", ["", ".", "/", str(REPO), str(REPO / "docs_src"), str(REPO / "families"),
                                  str(REPO.parent), str(REPO / "docs_src" / "x")])
def test_the_repository_its_sources_and_the_working_directory_are_refused(users_dir, capsys, monkeypatch, site):
    monkeypatch.chdir(users_dir)
    before = sorted(p.name for p in (REPO / "docs_src").iterdir())
    err = _error(capsys, ["build", "--site", site])
    assert "--site" in err and "name a new directory" in err
    assert sorted(p.name for p in (REPO / "docs_src").iterdir()) == before
    assert (users_dir / "thesis.tex").exists()


def test_a_users_directory_beside_the_site_is_not_deleted(users_dir, tmp_path, capsys):
    leftover = tmp_path / ".site.new"  # what a killed build leaves beside site/, here the user's
    leftover.mkdir()
    (leftover / "keep.txt").write_text("mine\n")
    (tmp_path / "build").mkdir()
    from generator.build import recover
    from generator.ownership import NotOurDirectory

    with pytest.raises(NotOurDirectory, match=r"\.site\.new"):
        recover(tmp_path / "site", progress=lambda line: None)
    assert (leftover / "keep.txt").exists()


def test_a_users_directory_is_refused_as_the_build_directory(users_dir, capsys, monkeypatch):
    monkeypatch.setenv("NNCANON_BUILD", str(users_dir))
    (users_dir / "docs").mkdir()  # a build once deleted a docs/ without its marker here
    (users_dir / "docs" / "chapter1.tex").write_text("x\n")
    err = _error(capsys, ["verify", "nosuch"])
    assert f"NNCANON_BUILD={users_dir}" in err and "thesis.tex" in err
    assert (users_dir / "docs" / "chapter1.tex").exists() and not (users_dir / ".nncanon-build").exists()


def test_a_build_directory_of_ours_from_before_the_marker_is_accepted(tmp_path):
    from generator.ownership import BUILD_MARKER, check_build_dir

    (tmp_path / "b" / "facts").mkdir(parents=True)
    (tmp_path / "b" / "docs_run").mkdir()
    check_build_dir(tmp_path / "b")
    assert (tmp_path / "b" / BUILD_MARKER).exists()
    check_build_dir(tmp_path / "c")  # absent: made
    assert (tmp_path / "c" / BUILD_MARKER).exists()


def test_a_site_of_ours_empty_or_absent_is_accepted(tmp_path):
    from generator.ownership import SITE_MARKER, check_site_dir

    build = tmp_path / "build"
    check_site_dir(tmp_path / "absent", build)
    (tmp_path / "empty").mkdir()
    check_site_dir(tmp_path / "empty", build)
    (tmp_path / "ours").mkdir()
    (tmp_path / "ours" / SITE_MARKER).write_text("")
    (tmp_path / "ours" / "index.html").write_text("")
    check_site_dir(tmp_path / "ours", build)


# ---------------------------------------------------------------- no script reaches a page

FIXTURES = REPO / "tests" / "fixtures" / "facts"
FAMILY = "qwen3_5_moe_text"
IMG = "<img src=x onerror=alert(1)>"


@pytest.mark.parametrize(
    "markup",
    [
        "<script>alert(1)</script>",
        '<script src="https://evil.example/x.js"></script>',
        '<script src="../assets/evil.js"></script>',
        '<img src="x" onerror="alert(1)">',
        '<div OnMouseOver="alert(1)">x</div>',
        '<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>',
        '<svg><animate attributeName="href" values="javascript:alert(1)"/></svg>',
        '<a href="javascript:alert(1)">x</a>',
    ],
)
def test_the_guard_finds_scripts_handlers_and_unsafe_urls(markup):
    from generator.site.html_guard import unsafe_html

    assert len(unsafe_html(f"<p>before</p>\n{markup}\n")) == 1, markup
    assert unsafe_html(f"<p>before</p>\n{markup}\n")[0][0] == 2


def test_the_guard_passes_the_sites_own_scripts():
    from generator.site.html_guard import unsafe_html

    page = (
        '<script src="../assets/javascripts/bundle.a5f9d56c.min.js"></script><script src="../../assets/nncanon.js">'
        '</script><script id="__config" type="application/json">{"base": ".."}</script>'
        '<script>__md_scope=new URL("..",location),__md_hash=e=>[...e].reduce(((e,_)=>(e<<5)-e+_.charCodeAt(0)),0),'
        '__md_get=(e,_=localStorage,t=__md_scope)=>JSON.parse(_.getItem(t.pathname+"."+e)),'
        '__md_set=(e,_,t=localStorage,a=__md_scope)=>{try{t.setItem(a.pathname+"."+e,JSON.stringify(_))}catch(e){}}'
        "</script><p>&lt;script&gt;alert(1)&lt;/script&gt; as text, onerror=x as text</p>"
    )
    assert unsafe_html(page) == []


# What each note-prose case once let through escape_markdown as "code" that Python-Markdown took for HTML.
NOTE_CASES = {
    "span-blank": "a `start\n\n<script>alert('span-blank')</script>\n\nend` b",
    "fence4": "para\n\n    ```\n<script>alert('fence4')</script>\n```\n",
    "ticks-nl": "one ` tick\n<script>alert('ticks-nl')</script>\nand ` another",
    "escaped-tick": "one \\` tick <script>alert('escaped-tick')</script> and ` another`",
}


def _render(tmp_path: Path, facts: dict) -> Path:
    import json

    from generator.site.render import render_site

    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / f"{FAMILY}.json").write_text(json.dumps(facts), encoding="utf-8")
    render_site(tmp_path / "facts", tmp_path / "docs")
    return tmp_path / "docs"


def _fixture() -> dict:
    import json

    return json.loads((FIXTURES / f"{FAMILY}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", sorted(NOTE_CASES))
def test_note_prose_markdown_reads_as_html_is_escaped(case):
    import markdown

    from generator.site.escaping import escape_markdown

    html = markdown.markdown(escape_markdown(NOTE_CASES[case]), extensions=["attr_list", "md_in_html",
                                                                             "pymdownx.superfences"])
    assert "<script>" not in html, html


def test_a_script_link_in_a_note_is_an_unsafe_url_naming_the_note(tmp_path):
    from generator.site.render import FactsError

    facts = _fixture()
    facts["notes"][1]["markdown"] += "\n\nSee [a](javascript:alert(1)).\n"
    with pytest.raises(FactsError) as caught:
        _render(tmp_path, facts)
    message = str(caught.value)
    assert f"families/{FAMILY}.notes.md note {facts['notes'][1]['title']!r}" in message
    assert "'javascript:alert(1)'" in message and "only http(s)" in message


@pytest.mark.slow
def test_yaml_text_and_note_prose_reach_the_built_site_as_text(tmp_path):
    """The nav title (a group, or lines[0] without one) and every note-prose case: built, no live script."""
    from generator.site.html_guard import unsafe_html
    from generator.site.render import mkdocs_build

    facts = _fixture()
    facts["group"] = IMG
    facts["notes"][0]["markdown"] += "\n\n" + "\n\n".join(NOTE_CASES.values()) + "\n"
    mkdocs_build(_render(tmp_path, facts), tmp_path / "site")  # the guard passes every page
    page = (tmp_path / "site" / "families" / FAMILY / "index.html").read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and IMG not in page
    for case in NOTE_CASES:
        assert f"alert('{case}')" in page and f"<script>alert('{case}')" not in page, case
    assert unsafe_html(page) == []


def test_the_nav_title_is_escaped_at_its_source(tmp_path):
    import json
    import types

    from site_templates import hooks

    docs = tmp_path
    (docs / "families").mkdir()
    (docs / "families" / "llama.md").write_text("x")
    (docs / "facts").mkdir()
    (docs / "facts" / "index.json").write_text(json.dumps({"families": [{"family": "llama", "group": IMG}]}))
    config = types.SimpleNamespace(nav=[{"Families": []}], docs_dir=str(docs))
    nav = hooks.on_config(config).nav[0]["Families"]
    assert nav[1] == {"&lt;img src=x onerror=alert(1)&gt;": [{"llama": "families/llama.md"}]}


def test_a_live_script_on_a_built_page_fails_the_build_naming_page_line_and_source(tmp_path):
    from generator.site.html_guard import UnsafeHtmlError, check_site

    (tmp_path / "families" / "llama").mkdir(parents=True)
    (tmp_path / "families" / "llama" / "index.html").write_text("<p>x</p>\n<p>y<script>alert(1)</script></p>\n")
    with pytest.raises(UnsafeHtmlError) as caught:
        check_site(tmp_path)
    assert "families/llama/index.html:2:" in str(caught.value) and "families/llama.yaml" in str(caught.value)


# ---------------------------------------------------------------- family names, files and paths


def _family_dir(tmp_path: Path, name: str = "qwen3", as_name: str | None = None) -> Path:
    """families/ holding one family's YAML (renamed to ``as_name``, its family: field too) and its notes."""
    import shutil

    directory = tmp_path / "families"
    directory.mkdir(exist_ok=True)
    text = (REPO / "families" / f"{name}.yaml").read_text(encoding="utf-8")
    as_name = as_name or name
    (directory / f"{as_name}.yaml").write_text(text.replace(f"family: {name}\n", f"family: {as_name}\n", 1))
    shutil.copy(REPO / "families" / f"{name}.notes.md", directory / f"{name}.notes.md")
    return directory


@pytest.mark.parametrize("name", ["index", "assets", "search", "Llama", "my-family", "<img src=x>"])
def test_a_family_name_that_is_not_an_identifier_or_is_a_site_path_is_refused(tmp_path, name):
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    path = _family_dir(tmp_path, as_name=name) / f"{name}.yaml"
    with pytest.raises(FamilyYamlError) as caught:
        load_family(path)
    assert repr(name) in str(caught.value) and "rename the file" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_yml_file_and_a_second_yaml_for_one_module_are_refused(tmp_path, monkeypatch):
    from generator.recipe.family import all_families
    from generator.recipe.fields import FamilyYamlError

    directory = _family_dir(tmp_path)
    monkeypatch.setenv("NNCANON_FAMILIES", str(directory))
    assert [f.family for f in all_families()] == ["qwen3"]
    (directory / "x.yml").write_text("family: x\n")
    with pytest.raises(FamilyYamlError, match=r"x\.yml: a family file must end in \.yaml; rename it to x\.yaml"):
        all_families()
    (directory / "x.yml").unlink()
    _family_dir(tmp_path, as_name="qwen3_copy")
    with pytest.raises(FamilyYamlError, match=r"qwen3_copy\.yaml: field 'module': nncanon\.families\.qwen3 is also "
                                              r"qwen3\.yaml's module"):
        all_families()


def test_a_missing_families_directory_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NNCANON_FAMILIES", str(tmp_path / "nonexistent"))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    err = _error(capsys, ["verify"])
    assert "nonexistent" in err and "NNCANON_FAMILIES" in err and "build first" not in err


def test_a_notes_file_symlinked_out_of_the_repository_is_refused(tmp_path):
    from generator.notes.notes_parse import _notes_source
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    directory = _family_dir(tmp_path)
    outside = tmp_path / "elsewhere.md"
    outside.write_text("## Secret\n\nnot reviewed\n")
    (directory / "qwen3.notes.md").unlink()
    (directory / "qwen3.notes.md").symlink_to(outside)
    with pytest.raises(FamilyYamlError) as caught:
        _notes_source(load_family(directory / "qwen3.yaml"), "notes", "qwen3.notes.md")
    assert "qwen3.notes.md" in str(caught.value) and "outside" in str(caught.value)


def test_a_symlinked_yaml_is_named_by_its_own_name(tmp_path):
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    directory = _family_dir(tmp_path)
    target = tmp_path / "target.txt"
    target.write_text("family: [\n")
    (directory / "broken.yaml").symlink_to(target)
    with pytest.raises(FamilyYamlError) as caught:
        load_family(directory / "broken.yaml")
    assert str(caught.value).startswith(str(directory / "broken.yaml")), str(caught.value)


@pytest.mark.parametrize("title", ["Support", "Config", "Printout"])
def test_a_note_whose_id_is_one_of_the_pages_own_is_refused(tmp_path, title):
    from generator.notes.notes_parse import NoteError, parse_notes

    notes = tmp_path / "x.notes.md"
    notes.write_text(f"## A note\n\ntext\n\n## {title}\n\ntext\n")
    with pytest.raises(NoteError) as caught:
        parse_notes(notes, "x")
    assert f"note {title!r} ({notes}:5)" in str(caught.value) and "explicit id" in str(caught.value)
    notes.write_text(f"## {title} {{#note-{title.lower()}}}\n\ntext\n")
    assert parse_notes(notes, "x")[1][0].slug == f"note-{title.lower()}"


# ---------------------------------------------------------------- recipes and claims that cannot hold


def _mutated(tmp_path: Path, edit, name: str = "llama") -> Path:
    import shutil

    import yaml

    path = tmp_path / f"{name}.yaml"
    data = yaml.safe_load((REPO / "families" / f"{name}.yaml").read_text(encoding="utf-8"))
    edit(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    shutil.copy(REPO / "families" / f"{name}.notes.md", tmp_path)
    return path


def _set(*keys, value):
    def edit(data):
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value
    return edit


@pytest.mark.parametrize(
    "edit, field, says",
    [
        (_set("tiny", "config", "vocab_size", value=300), "tiny.config.bos_token_id", "past the embedding (vocab_size 300)"),
        (_set("tiny", "config", "vocab_size", value=362), "tiny.tokenizer.special_tokens.<|reserved_special_token_0|>",
         "id 362 is past"),
        (_set("tiny", "config", "num_key_value_heads", value=3), "tiny.config.num_key_value_heads",
         "3 does not divide num_attention_heads 8"),
        (lambda d: d["claims"]["identities"][0].update(tolerance=float("inf")), "claims.identities[0].tolerance",
         "must be a finite number"),
        (lambda d: d["claims"]["identities"][0].update(tolerance=float("nan")), "claims.identities[0].tolerance",
         "must be a finite number"),
    ],
)
def test_a_recipe_or_claim_that_cannot_run_or_hold_is_refused_at_load(tmp_path, edit, field, says):
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    with pytest.raises(FamilyYamlError) as caught:
        load_family(_mutated(tmp_path, edit))
    assert f"field '{field}'" in str(caught.value) and says in str(caught.value), str(caught.value)


def test_pin_refuses_a_class_of_another_family(tmp_path):
    from generator.checkpoint.checkpoints import build_model
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    family = load_family(_mutated(tmp_path, _set("tiny", "class", value="GPT2LMHeadModel")))
    with pytest.raises(FamilyYamlError, match=r"field 'tiny\.class': GPT2LMHeadModel is a 'gpt2' model, but "
                                              r"nncanon\.families\.llama serves llama"):
        build_model(get_family(family))


@pytest.mark.parametrize("name", ["../../x", "/etc/passwd", "../families/llama", "llama/../../x"])
def test_a_family_argument_is_a_name_not_a_path(capsys, name):
    err = _error(capsys, ["checkpoint", name])
    assert repr(name) in err and "is not a family name" in err


def test_a_mixer_that_is_not_a_module_of_the_block_fails_the_claims(tmp_path):
    import types

    from generator.facts.collect import ClaimError, stack
    from generator.recipe.family import load_family

    family = load_family(_mutated(tmp_path, _set("page", "block_kinds", "full_attention", "mixer", value="nosuch")))

    class Tiny:
        def get(self, path):
            if path.endswith("nosuch"):
                raise AttributeError(path)

    models = types.SimpleNamespace(default="eager", get=lambda load: Tiny())
    module = types.SimpleNamespace(layer_types=lambda model: ["full_attention"] * 4)
    with pytest.raises(ClaimError, match=r"page\.block_kinds\.full_attention\.mixer: 'nosuch' is not a module of "
                                         r"layers\.0"):
        stack(family, module, None, models, [], [])


# ---------------------------------------------------------------- the library: bad checkpoints, bad inputs


@pytest.fixture(scope="module")
def llama_dir() -> Path:
    from generator.checkpoint.checkpoints import checkpoint_dir

    return checkpoint_dir(get_family("llama"))


@pytest.fixture(scope="module")
def llama(llama_dir):
    import nncanon

    return nncanon.load(llama_dir)


def _damaged(tmp_path: Path, llama_dir: Path, edit) -> Path:
    import shutil

    copy = tmp_path / "ckpt"
    shutil.copytree(llama_dir, copy)
    edit(copy)
    return copy


def _no_hidden_size(d: Path) -> None:
    import json

    config = json.loads((d / "config.json").read_text())
    del config["hidden_size"]
    (d / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize(
    "edit, names",
    [
        (_no_hidden_size, ["config.json", "hidden_size missing"]),
        (lambda d: (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:5000]),
         ["model.safetensors", "truncated or damaged"]),
        (lambda d: (d / "model.safetensors").write_bytes(bytes((d / "model.safetensors").stat().st_size)),
         ["model.safetensors", "truncated or damaged"]),
        (lambda d: [(d / f).unlink() for f in ("tokenizer.json", "tokenizer_config.json")],
         ["no tokenizer files", "tokenizer.json"]),
    ],
    ids=["no-hidden-size", "truncated-weights", "zeroed-weights", "no-tokenizer"],
)
def test_a_damaged_checkpoint_names_the_file(tmp_path, llama_dir, edit, names):
    import nncanon
    from nncanon.families import CheckpointError

    with pytest.raises(CheckpointError) as caught:
        nncanon.load(_damaged(tmp_path, llama_dir, edit))
    assert all(n in str(caught.value) for n in names) and "\n" not in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    "value, says",
    [
        (123, "trace(input): got int 123"),
        ([], "trace(input): an empty list"),
        ("torch.zeros(1, 0, dtype=torch.long)", "trace(input): no tokens"),
        ([[999]], "token id 999 is outside the vocabulary (vocab_size 384)"),
        ([[-1, 2]], "token id -1 is negative"),
        ("torch.ones(1, 3)", "token ids of dtype torch.float32"),
    ],
)
def test_a_bad_trace_input_names_the_argument(llama, value, says):
    import torch  # noqa: F401 - the tensor cases are written as text, so their ids read well

    from nncanon.core.inputs import InputError

    value = eval(value) if isinstance(value, str) else value
    with pytest.raises(InputError, match=re.escape(says)):
        with llama.trace(value):
            llama.logits.save()


def test_the_cache_names_a_name_that_is_not_a_string(llama):
    from nncanon.core.inputs import InputError

    with pytest.raises(InputError, match=r"model.cache\(names\): 123 \(int\) is not a name"):
        llama.cache([123], "hello")


def test_a_value_read_outside_a_trace_is_named_in_standard_names(llama):
    from nncanon.guards.errors import OutsideTrace

    with pytest.raises(OutsideTrace, match=r"^model\.logits is read inside a `with model\.trace"):
        llama.logits.save()
    with pytest.raises(OutsideTrace, match=r"^model\.layers\[0\]\.self_attn\.attention_output is read inside"):
        llama.layers[0].self_attn.attention_output.save()


def test_good_inputs_still_run(llama):
    import torch

    for value in ("hello", ["hello", "world"], [[1, 2, 3]], torch.tensor([[1, 2, 3]]), llama.tokenizer("hi",
                                                                                                       return_tensors="pt")):
        with llama.trace(value):
            logits = llama.logits.save()
        assert logits.shape[-1] == 384


# ---------------------------------------------------------------- the rest of the build's inputs


def test_a_lone_surrogate_in_a_yaml_string_is_named(tmp_path):
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    path = _mutated(tmp_path, _set("tagline", value="a \ud800 b"))  # written as the escape "\uD800"
    with pytest.raises(FamilyYamlError) as caught:
        load_family(path)
    assert "field 'tagline'" in str(caught.value) and "surrogate" in str(caught.value), str(caught.value)


def test_a_truncated_facts_file_in_the_cache_is_collected_again(tmp_path, monkeypatch):
    import generator.facts.collect as collect

    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    facts = tmp_path / "build" / "facts"
    facts.mkdir(parents=True)
    (facts / "llama.json").write_text('{"schema": 1, "fam')
    (facts / "llama.key").write_text(collect.cache_key(get_family("llama")) + "\n")
    monkeypatch.setattr(collect, "collect", lambda family, progress, kernels_only: {"family": "llama", "again": True})
    said = []
    assert collect.cached_facts(get_family("llama"), progress=said.append) == ({"family": "llama", "again": True}, True)
    assert any("llama.json" in line and "collecting again" in line for line in said), said


def test_a_cache_directory_that_is_a_file_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NNCANON_CACHE", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("x\n")
    err = _error(capsys, ["checkpoint", "llama"])
    assert f"NNCANON_CACHE={tmp_path / 'a-file'}" in err and "not a directory" in err and "Errno" not in err


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve_refuses_a_port_out_of_range(capsys, port):
    err = _error(capsys, ["serve", "--port", port])
    assert f"--port {port}" in err and "0 to 65535" in err


def test_serve_names_a_busy_port(capsys, monkeypatch, tmp_path):
    import socket

    import generator.build as build

    monkeypatch.setattr(build, "SITE", tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = _error(capsys, ["serve", "--port", str(port)])
    assert f"port {port}" in err and "--port" in err


def test_a_symlink_loop_among_the_families_is_one_line(tmp_path, monkeypatch, capsys):
    directory = _family_dir(tmp_path)
    (directory / "loop.yaml").symlink_to(directory / "loop.yaml")
    monkeypatch.setenv("NNCANON_FAMILIES", str(directory))
    monkeypatch.setenv("NNCANON_BUILD", str(tmp_path / "build"))
    err = _error(capsys, ["verify"])
    assert "loop.yaml" in err and "symbolic links" in err


@pytest.mark.parametrize("value, says", [("[1, 2]", "= list: assign a tensor of the value's shape"),
                                         ("3", "= int: assign a tensor"),
                                         ("torch.zeros(1, 4, 40, dtype=torch.float64)",
                                          "is torch.float32; the assigned tensor is torch.float64")])
def test_an_edit_that_is_not_a_tensor_of_the_values_dtype_is_named(llama, value, says):
    import torch  # noqa: F401 - used by the eval'd cases

    from nncanon.guards.errors import EditTypeError

    with pytest.raises(EditTypeError, match=r"^model\.layers\[0\]\.layer_output .*" + re.escape(says)):
        with llama.trace("hello"):
            llama.layers[0].layer_output = eval(value)
            llama.logits.save()


def test_a_prompt_over_the_position_embedding_is_named():
    import nncanon
    from generator.checkpoint.checkpoints import checkpoint_dir
    from nncanon.core.inputs import InputError

    gpt2 = nncanon.load(checkpoint_dir(get_family("gpt2")))
    for value in ([[1] * 513], "hello " * 600, ["hi", "hello " * 600]):
        with pytest.raises(InputError, match=r"tokens, over the 512 positions"):
            with gpt2.trace(value):
                gpt2.logits.save()


def test_remote_with_ndif_unreachable_names_the_host(llama_dir, tmp_path, monkeypatch):
    from huggingface_hub import constants

    import nncanon
    from nncanon.core.hubcache import lay_out
    from nncanon.core.remote import RemoteUnreachable

    lay_out(llama_dir, "nncanon-tiny/llama", tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    model = nncanon.load("nncanon-tiny/llama")
    with pytest.raises(RemoteUnreachable, match=r"^remote=True: NDIF at http://127\.0\.0\.1:9 cannot be reached"):
        with model.trace("hello", remote="http://127.0.0.1:9"):  # the discard port: nothing listens
            model.logits.save()


def test_a_full_size_config_of_another_family_is_named_not_a_note(tmp_path):
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    path = _mutated(tmp_path, lambda d: d["checkpoints"][0]["config"].update(model_type="bert"))
    with pytest.raises(FamilyYamlError, match=r"field 'checkpoints\[0\]\.config\.model_type': 'bert' is not a model "
                                              r"type nncanon\.families\.llama serves \(llama\)"):
        load_family(path)


def test_the_repositorys_own_build_directory_is_ours_whatever_it_holds(monkeypatch):
    from generator import ownership

    seen = []
    monkeypatch.setattr(ownership.Path, "mkdir", lambda self, **kw: seen.append(self))
    monkeypatch.setattr(ownership.Path, "write_text", lambda self, text: seen.append(self))
    ownership.check_build_dir(REPO / "build")  # holds checkpoints/ and whatever older builds left


# ---------------------------------------------------------------- no argument writes code (issue 46)


def _written() -> set[str]:
    return {p.name for p in (REPO / "nncanon" / "families").iterdir()} | {p.name for p in (REPO / "families").iterdir()}


@pytest.mark.parametrize("argv, says", [
    (["zz", "--model-type", 'x", __import__("os").system("touch pwned"), "'], "is not a model type"),
    (["zz", "--model-type", 'x"y'], "is not a model type"),
    (["zz", "--model-type", ""], "is not a model type"),
    (["zz", "--model-type", "glm5"], "did you mean"),
    (["zz\n"], "is not lowercase letters"),
    (["index"], "is one of the site's own paths"),
    (["../zz"], "is not lowercase letters"),
    (["zz\"); import os; ("], "is not lowercase letters"),
])
def test_new_writes_no_code_and_no_path_from_its_arguments(capsys, argv, says):
    before = _written()
    err = _error(capsys, ["new", argv[0], "--like", "llama", *argv[1:]])
    assert says in err and "python -m generator new" in err
    assert _written() == before, "a refused `new` wrote a file"


def test_new_writes_the_model_type_as_a_literal_and_parses_the_module(tmp_path, monkeypatch):
    """A hyphenated model type (transformers has them) is written with repr; and a module that would not parse
    is never written (the guard behind the identifier checks)."""
    import ast
    import shutil

    import generator.contribute as contribute
    from generator.recipe.fields import FamilyYamlError

    (tmp_path / "families").mkdir()
    for name in ("llama.yaml", "llama.notes.md"):
        shutil.copy(REPO / "families" / name, tmp_path / "families" / name)
    modules = tmp_path / "nncanon" / "families"
    modules.mkdir(parents=True)
    shutil.copy(REPO / "nncanon" / "families" / "llama.py", modules / "llama.py")
    monkeypatch.setenv("NNCANON_FAMILIES", str(tmp_path / "families"))
    monkeypatch.setattr(contribute, "REPO_ROOT", tmp_path)
    written = contribute.new_family("gpt_copy", "llama", "openai-gpt")
    module = ast.parse(written[0].read_text())
    assigned = {t.id: ast.literal_eval(n.value) for n in module.body if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name) and t.id in ("FAMILY", "MODEL_TYPES")}
    assert assigned == {"FAMILY": "gpt_copy", "MODEL_TYPES": ("openai-gpt",)}
    (modules / "llama.py").write_text((modules / "llama.py").read_text() + "\ndef broken(:\n")
    with pytest.raises(FamilyYamlError, match=r"does not parse \(line \d+: .*\); nothing was written"):
        contribute.new_family("other", "llama", "olmo")
    assert not (modules / "other.py").exists() and not (tmp_path / "families" / "other.yaml").exists()


def test_a_config_class_default_token_outside_the_tiny_vocabulary_names_the_field(tmp_path):
    """issue 48: `pin` on a tiny config whose config class's default pad_token_id fell outside the shrunk vocabulary
    was torch's bare 'Padding_idx must be within num_embeddings' with a 40-line traceback (an id the YAML sets is
    refused when the YAML loads)."""
    import json

    from generator.checkpoint.checkpoints import _check_token_ids
    from generator.checkpoint.tiny_tokenizer import transformers_class
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    family = load_family(_family_dir(tmp_path) / "qwen3.yaml")
    config = transformers_class(family, family.tiny["class"], "tiny.class").config_class(
        **json.loads(json.dumps(family.tiny["config"])))
    _check_token_ids(family, config)
    config.pad_token_id = 151_643  # what a config class's default holds for a full-size vocabulary
    with pytest.raises(FamilyYamlError) as caught:
        _check_token_ids(family, config)
    vocab = family.tiny["config"]["vocab_size"]
    assert str(caught.value).endswith(
        f"qwen3.yaml: field 'tiny.config.pad_token_id': 151643 (Qwen3Config's default) is outside the tiny vocabulary "
        f"(vocab_size {vocab}); set tiny.config.pad_token_id to an id below {vocab} (or null), or make vocab_size "
        "large enough to hold it")


def test_a_full_size_config_naming_another_models_class_names_the_field(tmp_path):
    """issue 48: architectures naming another model's class was a traceback from deep in that class's __init__."""
    import yaml

    from generator.checkpoint.meta_models import meta_config
    from generator.recipe.family import load_family
    from generator.recipe.fields import FamilyYamlError

    path = _family_dir(tmp_path) / "qwen3.yaml"
    data = yaml.safe_load(path.read_text())
    item = next(i for i, c in enumerate(data["checkpoints"]) if "config" in c)
    data["checkpoints"][item]["config"]["architectures"] = ["Gemma2ForCausalLM"]
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    family = load_family(path)
    with pytest.raises(FamilyYamlError, match=rf"field 'checkpoints\[{item}\].config.architectures': Gemma2ForCausalLM "
                                              r"is a 'gemma2' model, but this config's model_type is 'qwen3'; write "
                                              "the class the checkpoint's own config.json names"):
        meta_config(family, data["checkpoints"][item]["id"])
