"""The fenced Python blocks of the READMEs and the docs site, as runnable examples.

Every ```` ```python ```` block in README.md, packages/*/README.md, the example plugin's
README and docs/ runs in CI (issue 27). A block runs as it stands, or continues the block
before it in the same file when the line just above its fence is ``<!-- continue -->``:
the two then run as one script. Each script (an `Example`) runs in the tox env that
holds what it imports (`tox_env`): the RL libraries' in ``clients``, Ray's in
``ray``, kernelgym-minatar's (its README's blocks) in ``minatar``, every other in
``integration``; a block that needs a GPU (a CUDA graph) in ``gpu``,
which only a machine with a GPU runs.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the line before a fence that makes its block a continuation of the previous one
CONTINUE = "<!-- continue -->"
#: top-level modules whose blocks run in each tox env other than ``integration``
ENV_OF_MODULE = {
    "stable_baselines3": "clients",
    "skrl": "clients",
    "torchrl": "clients",
    "tensordict": "clients",
    "pettingzoo": "clients",
    "kernelgym.envs.sb3": "clients",
    "kernelgym.envs.pettingzoo_adapter": "clients",
    "ray": "ray",
    "kernelgym.collectors.ray": "ray",
    "kernelgym.minatar": "minatar",
    # CUDA graphs need a GPU: no tox env has one; run on a GPU machine (see test_doc_examples.py)
    "kernelgym.envs.cuda_graph": "gpu",
}
#: folders whose blocks run in a tox env of their own whatever they import (the games'
#: ids need kernelgym-minatar installed, which a plain `import kernelgym.envs` does not show)
ENV_OF_FOLDER = {"packages/minatar/": "minatar"}
TOX_ENVS = ("integration", "clients", "ray", "minatar", "gpu")
#: the tox env that runs each README's first example again, without kernelgym-core's cuda extra
#: (`readme_first_examples`): a reader on macOS starts there. No example runs only there.
NO_CUDA_ENV = "nocuda"
_OPEN = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*$")
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<from>[\w.]+)[ \t]+import|import[ \t]+(?P<names>[\w., \t]+))", re.MULTILINE
)


@dataclasses.dataclass(frozen=True)
class Example:
    """One script: a block and the blocks that continue it."""

    path: str  # relative to the repository root
    line: int  # of the first block's opening fence, 1-based
    source: str

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def markdown_files(root: Path = ROOT) -> list[Path]:
    """Every Markdown file whose Python blocks must run."""
    files = readme_files(root)
    files += sorted((root / "docs").rglob("*.md"))
    return files


def examples_in(text: str, path: str) -> list[Example]:
    """The examples of one Markdown text, continuations joined to the block they continue.

    Raises
    ------
    ValueError
        A continuation with no block before it, an unclosed fence, or an empty block.
    """
    lines = text.splitlines()
    examples: list[Example] = []
    index = 0
    while index < len(lines):
        opening = _OPEN.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, start = opening["indent"], index
        index += 1
        while index < len(lines) and lines[index].rstrip() != f"{indent}```":
            index += 1
        if index == len(lines):
            raise ValueError(f"{path}:{start + 1}: the ```python fence is never closed")
        body = textwrap.dedent("\n".join(line.removeprefix(indent) for line in lines[start + 1 : index]))
        if not body.strip():
            raise ValueError(f"{path}:{start + 1}: an empty ```python block")
        previous = next((line.strip() for line in reversed(lines[:start]) if line.strip()), "")
        if previous == CONTINUE:
            if not examples:
                raise ValueError(f"{path}:{start + 1}: {CONTINUE} but no ```python block before it")
            first = examples.pop()
            examples.append(dataclasses.replace(first, source=f"{first.source}\n{body}"))
        else:
            examples.append(Example(path, start + 1, body))
        index += 1
    return examples


def readme_files(root: Path = ROOT) -> list[Path]:
    """README.md, each package's and the example plugin's."""
    plugin = root / "examples" / "kernelgym-example-plugin" / "README.md"
    return [root / "README.md", *sorted(root.glob("packages/*/README.md")), plugin]


def readme_first_examples(root: Path = ROOT) -> list[Example]:
    """The first example of each README (`readme_files`), the one a reader runs first."""
    firsts = []
    for file in readme_files(root):
        examples = examples_in(file.read_text(encoding="utf-8"), file.relative_to(root).as_posix())
        if not examples:
            raise ValueError(f"{file.relative_to(root).as_posix()}: no ```python block")
        firsts.append(examples[0])
    return firsts


def all_examples(root: Path = ROOT) -> list[Example]:
    """The examples of every file of `markdown_files`, in order."""
    return [
        example
        for file in markdown_files(root)
        for example in examples_in(file.read_text(encoding="utf-8"), file.relative_to(root).as_posix())
    ]


def imported_modules(source: str) -> set[str]:
    """The modules a script imports (``import a.b, c`` and ``from a.b import c``)."""
    modules = set()
    for match in _IMPORT.finditer(source):
        if match["from"]:
            modules.add(match["from"])
        else:
            modules.update(name.split(" as ")[0].strip() for name in match["names"].split(","))
    return {module for module in modules if module}


def tox_env(example: Example) -> str:
    """The tox env that has the extras the example imports (`NO_CUDA_ENV` runs only
    `readme_first_examples`, in addition)."""
    envs = {env for folder, env in ENV_OF_FOLDER.items() if example.path.startswith(folder)}
    for module in imported_modules(example.source):
        for prefix, env in ENV_OF_MODULE.items():
            if module == prefix or module.startswith(prefix + "."):
                envs.add(env)
    if len(envs) > 1:
        raise ValueError(f"{example.id} imports modules of several tox envs: {sorted(envs)}")
    return envs.pop() if envs else "integration"


SITE = "https://kernelgym.github.io/kernelgym/"


def site_links(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(file, page, anchor)`` of every link from README.md or a package README into the site."""
    links = []
    for file in [root / "README.md", *sorted(root.glob("packages/*/README.md"))]:
        for target in re.findall(
            r"\]\(" + re.escape(SITE) + r"([^)\s#]*)(?:#([^)\s]*))?\)", file.read_text(encoding="utf-8")
        ):
            links.append((file.relative_to(root).as_posix(), *target))
    return links
