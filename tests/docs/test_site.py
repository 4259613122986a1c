"""The built docs site: no reST leftovers, and every public method on its class's page.

`mkdocs build --strict` checks links and references but not what a docstring renders as:
a `.. code-block::` directive or a `:class:` role shows as literal text, and a method
that a class gets from a mixin is missing unless the mkdocstrings setup renders inherited
members. The `docs` tox env builds the site and points `KERNELGYM_DOCS_SITE` at it;
elsewhere the site is built here (skipped where mkdocs is not installed).
"""

import functools
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
API_PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))
# a reST directive (`.. code-block:: python`, `.. note::`) or role (:class:`X`) left in a docstring
REST = re.compile(r"^\s*\.\. [a-z-]+::|:(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|ref|doc):`", re.M)
SIGNATURE_WIDTH = 88  # mkdocs.yml's line_length


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    built = os.environ.get("KERNELGYM_DOCS_SITE")
    if built:
        return Path(built)
    pytest.importorskip("mkdocs", reason="the docs tox env installs mkdocs and its plugins")
    directory = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(directory)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return directory


def page_text(page: Path) -> str:
    """The visible text of a built page (tags stripped, entities decoded), code included."""
    return page_text_of(page.read_text(encoding="utf-8"))


def page_text_of(markup: str) -> str:
    markup = re.sub(r"<(script|style)\b.*?</\1>", "", markup, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def built_page(site: Path, source: Path) -> Path:
    return site / source.relative_to(ROOT / "docs").with_suffix("") / "index.html"


def test_no_page_shows_rest_markup(site):
    leftovers = {}
    for page in sorted(site.rglob("*.html")):
        found = [m.group(0).strip() for m in REST.finditer(page_text(page))]
        if found:
            leftovers[str(page.relative_to(site))] = found[:5]
    assert not leftovers, f"reST markup rendered as text (write markdown in the docstrings): {leftovers}"


def test_no_numbered_list_item_shows_as_text(site):
    # Python-Markdown needs 4-space indents and blank lines around a block inside a list
    # item; without them the items after a code block render as a paragraph "4. ..."
    broken = {}
    for page in sorted(site.rglob("*.html")):
        markup = re.sub(r"<pre\b.*?</pre>", "", page.read_text(encoding="utf-8"), flags=re.S)
        lines = [line for line in page_text_of(markup).splitlines() if re.match(r"\s*\d+\. \S", line)]
        if lines:
            broken[str(page.relative_to(site))] = lines[:3]
    assert not broken, f"numbered list items rendered as text: {broken}"


def test_the_write_an_env_steps_are_one_list_with_step_6s_code(site):
    markup = (site / "guides" / "write-an-env" / "index.html").read_text(encoding="utf-8")
    steps = re.search(r"<ol>(.*?)</ol>", markup.split("<h1", 1)[1], re.S).group(1)
    assert len(re.findall(r"<li>", steps)) == 8
    step_6 = steps.split("The spec and the hook", 1)[1].split("<li>", 1)[0]
    assert "EnvSpec" in step_6 and "kernelgym_register_envs" in step_6 and "kernelgym.envs" in step_6


def documented_modules(source: Path) -> list[str]:
    """The `::: module` directives of an API page whose members are rendered."""
    modules, lines = [], source.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("::: "):
            options = "\n".join(lines[number + 1 : number + 4])
            if "members: false" not in options:
                modules.append(line[4:].strip())
    return modules


@functools.cache
def loaded_package(package: str):
    """Griffe's static view of one kernelgym package, as mkdocstrings reads it (loaded once)."""
    import griffe

    loader = griffe.GriffeLoader(search_paths=[str(p) for p in sorted((ROOT / "packages").glob("*/src"))])
    loader.load(package)
    loader.resolve_aliases(external=False, implicit=False)
    return loader.modules_collection


def public_methods(module_path: str) -> dict[str, list[str]]:
    """`{class path: public method names}` of a module's own classes, inherited ones included."""
    pytest.importorskip("griffe", reason="the docs tox env installs griffe")
    module = loaded_package(".".join(module_path.split(".")[:2]))[module_path]
    methods = {}
    for name, member in module.members.items():
        if member.is_alias or not member.is_class or name.startswith("_"):
            continue
        methods[member.path] = sorted(
            method
            for method, value in member.all_members.items()
            if not method.startswith("_") and not value.is_alias and value.is_function
        )
    return methods


@pytest.mark.parametrize("source", API_PAGES, ids=lambda p: p.stem)
def test_every_public_method_is_on_its_class_page(site, source):
    page = built_page(site, source)
    anchors = set(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))
    missing = [
        f"{cls}.{method}"
        for module in documented_modules(source)
        for cls, methods in public_methods(module).items()
        for method in methods
        if f"{cls}.{method}" not in anchors
    ]
    assert not missing, f"{source.name}: public methods missing from their class's section: {missing}"


def test_the_memory_page_shows_the_mixins_methods_with_their_types(site):
    page = built_page(site, ROOT / "docs" / "api" / "memory.md")
    markup = page.read_text(encoding="utf-8")
    for method in ("create_tensor", "add_samples", "sample_all", "save", "load", "get_tensor_by_name"):
        assert f'id="kernelgym.memory.base.Memory.{method}"' in markup
        assert f'id="kernelgym.memory.random_memory.RandomMemory.{method}"' in markup
    # RandomMemory's parameter table types `device` and the export options as their docstring
    # does (not `int`, "required", as when they were documented in one line)
    section = markup.split('id="kernelgym.memory.random_memory.RandomMemory"', 1)[1].split("doc-children", 1)[0]
    for name, kind, default in [("device", "str or device", "None"), ("export_format", "pt", "'pt'")]:
        row = re.search(rf"<code>{name}</code>.*?</tr>", section, re.S)
        assert row is not None, f"RandomMemory: no parameter row for {name}"
        cells = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row.group(0))).split())
        assert kind in cells and default in cells and "int" not in cells and "required" not in cells, cells


@pytest.mark.parametrize("source", API_PAGES, ids=lambda p: p.stem)
def test_long_signatures_are_wrapped(site, source):
    markup = built_page(site, source).read_text(encoding="utf-8")
    signatures = re.findall(r'<div class="doc-signature[^"]*">(.*?)</div>', markup, re.S)
    assert signatures, f"{source.name}: no separate signatures rendered"
    texts = [html.unescape(re.sub(r"<[^>]+>", "", signature)) for signature in signatures]
    too_long = [
        line
        for text in texts
        if re.match(r"\s*[\w.]+\(", text)  # a function or class: an attribute's value has no line breaks
        for line in text.splitlines()
        if len(line) > SIGNATURE_WIDTH + 8  # a name or default that cannot be split may overhang a little
    ]
    assert not too_long, f"{source.name}: signature lines over {SIGNATURE_WIDTH} columns: {too_long[:3]}"
