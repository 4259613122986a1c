"""Every ```python block of the READMEs and the docs site runs (issue 27).

Each example (a block, with the blocks that continue it; see ``tests/doc_examples.py``)
runs as a script of its own in a fresh subprocess, in a temporary directory, as a reader
who saves it would run it. The examples of one tox env run here: ``KERNELGYM_DOC_EXAMPLES``
names it (``integration`` when unset; tox.ini sets ``clients``, ``ray``, ``minatar`` and
``nocuda``, which runs each README's first example again without numba-cuda; on a machine
with a GPU, ``KERNELGYM_DOC_EXAMPLES=gpu pytest tests/test_doc_examples.py`` runs the blocks
that need one).
"""

import os
import re
import subprocess
import sys
import unicodedata

import pytest

from doc_examples import (
    CONTINUE,
    NO_CUDA_ENV,
    ROOT,
    TOX_ENVS,
    Example,
    all_examples,
    examples_in,
    imported_modules,
    readme_files,
    readme_first_examples,
    site_links,
    tox_env,
)

THIS_ENV = os.environ.get("KERNELGYM_DOC_EXAMPLES", "integration")
EXAMPLES = all_examples()
#: seconds one example may take: a first compile of its kernels on a busy 2-core machine
TIMEOUT = 300


def test_this_tox_env_is_one_that_runs_examples():
    runs = (*TOX_ENVS, NO_CUDA_ENV)
    assert THIS_ENV in runs, f"KERNELGYM_DOC_EXAMPLES: expected one of {runs}, got {THIS_ENV!r}"


def test_every_readme_and_guide_quickstart_is_collected():
    files = {example.path for example in EXAMPLES}
    for expected in (
        "README.md",
        "packages/core/README.md",
        "packages/envs/README.md",
        "packages/collectors/README.md",
        "packages/memory/README.md",
        "packages/minatar/README.md",
        "examples/kernelgym-example-plugin/README.md",
        "docs/guides/train.md",
    ):
        assert expected in files
    assert {tox_env(example) for example in EXAMPLES} == set(TOX_ENVS)


def test_a_continuation_joins_the_block_before_it_and_nothing_else_does():
    text = (
        "# t\n\n```python\na = 1\n```\n\n```bash\nls\n```\n\n"
        + CONTINUE
        + "\n\n```python\nb = a\n```\n\n  ```python\n  c = 3\n  ```\n"
    )
    assert examples_in(text, "t.md") == [Example("t.md", 3, "a = 1\nb = a"), Example("t.md", 17, "c = 3")]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (CONTINUE + "\n```python\nb = 1\n```\n", "no ```python block before it"),
        ("```python\na = 1\n", "never closed"),
        ("```python\n\n```\n", "empty"),
    ],
    ids=["continuation-first", "unclosed", "empty"],
)
def test_a_malformed_example_is_refused_naming_the_line(text, problem):
    with pytest.raises(ValueError, match=problem) as error:
        examples_in(text, "t.md")
    assert "t.md:" in str(error.value)


def test_an_example_runs_where_its_imports_are_installed():
    assert imported_modules("import torch, kernelgym.envs as kge\nfrom a.b import c") == {
        "torch",
        "kernelgym.envs",
        "a.b",
    }
    assert tox_env(Example("t.md", 1, "from stable_baselines3 import PPO")) == "clients"
    assert tox_env(Example("t.md", 1, "from kernelgym.collectors.ray import RayCollector")) == "ray"
    assert tox_env(Example("t.md", 1, "import numpy as np")) == "integration"
    assert tox_env(Example("packages/minatar/README.md", 1, "import kernelgym.envs")) == "minatar"
    with pytest.raises(ValueError, match="several tox envs"):
        tox_env(Example("t.md", 1, "import ray\nimport skrl"))


def examples_of(env: str) -> list[Example]:
    """The examples ``env`` runs."""
    if env == NO_CUDA_ENV:
        return readme_first_examples()
    return [example for example in EXAMPLES if tox_env(example) == env]


def test_the_nocuda_env_runs_the_first_example_of_every_readme():
    firsts = examples_of(NO_CUDA_ENV)
    assert [example.path for example in firsts] == [path.relative_to(ROOT).as_posix() for path in readme_files()]
    assert "packages/envs/README.md" in {example.path for example in firsts}
    for example in firsts:  # the first of its file: no example of that file starts above it
        assert example.line == min(other.line for other in EXAMPLES if other.path == example.path)


@pytest.mark.parametrize("example", examples_of(THIS_ENV), ids=lambda e: e.id)
def test_the_example_runs_as_it_stands(example, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(example.source + "\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == 0, f"{example.id} failed:\n{example.source}\n--- stderr:\n{result.stderr[-4000:]}"


def test_the_readmes_link_only_to_pages_and_anchors_the_site_has():
    # README.md and the package READMEs (PyPI pages) link into the site by absolute URL;
    # mkdocs --strict checks the site's own links, this checks the ones pointing into it
    for path, page, anchor in site_links():
        source = ROOT / "docs" / (page.rstrip("/") + ".md" if page else "index.md")
        if not source.exists():
            source = ROOT / "docs" / page.rstrip("/") / "index.md"
        assert source.exists(), f"{path} links to {page!r}, which no file in docs/ makes"
        if anchor:
            headings = {
                heading_anchor(line) for line in source.read_text(encoding="utf-8").splitlines() if line.startswith("#")
            }
            assert anchor in headings, f"{path} links to {page}#{anchor}, a heading {source.name} lacks"


def heading_anchor(line):
    """The anchor the site's toc extension gives a Markdown heading (Python-Markdown's slugify)."""
    text = unicodedata.normalize("NFKD", line.lstrip("#").strip()).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)
