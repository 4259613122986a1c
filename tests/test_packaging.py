"""Release metadata of the six distributions, checked from their sources (no build needed).

A wheel built from a package folder ships that folder's LICENSE and README (the PyPI page),
so both must stand on their own; siblings are pinned to the one shared VERSION.
"""

import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def _wheels_alone():
    """tests/packaging/wheels_alone.py, the script (by path: a folder named `packaging` would shadow
    the `packaging` library)."""
    return load_script("tests/packaging/wheels_alone.py")


# distribution name -> its folder, as the wheels check builds them
DISTRIBUTIONS = _wheels_alone().FOLDERS
VERSION = (ROOT / "VERSION").read_text().strip()


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def all_requirements(metadata: dict) -> list[Requirement]:
    texts = list(metadata.get("dependencies", []))
    for extra in metadata.get("optional-dependencies", {}).values():
        texts.extend(extra)
    return [Requirement(text) for text in texts]


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_siblings_are_pinned_to_the_shared_version(name):
    siblings = [r for r in all_requirements(project(DISTRIBUTIONS[name])) if r.name in DISTRIBUTIONS]
    assert siblings or name == "kernelgym-collectors" or name == "kernelgym-core"
    for requirement in siblings:
        assert str(requirement.specifier) == f"=={VERSION}", (name, str(requirement))


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_each_distribution_ships_the_apache_licence(name):
    folder = DISTRIBUTIONS[name]
    metadata = project(folder)
    assert metadata["license"] == "Apache-2.0"
    assert metadata["license-files"] == ["LICENSE"]
    licence = (folder / "LICENSE").read_text()
    assert licence == (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_each_distribution_says_what_it_supports(name):
    metadata = project(DISTRIBUTIONS[name])
    classifiers = metadata["classifiers"]
    python_versions = {
        c.rsplit(" ", 1)[-1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    minimum = metadata["requires-python"].removeprefix(">=")
    assert minimum in python_versions and all(v >= minimum for v in python_versions)
    assert "Typing :: Typed" in classifiers
    assert metadata["keywords"]
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(metadata["urls"])


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_each_package_is_marked_typed(name):
    sources = DISTRIBUTIONS[name] / "src" / "kernelgym"
    packages = [p for p in sources.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    assert packages
    for package in packages:
        assert (package / "py.typed").exists(), package


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_pypi_page_has_no_relative_links(name):
    # PyPI renders the README outside the repository: a relative link there is a 404
    readme = (DISTRIBUTIONS[name] / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", readme) + re.findall(r'(?:src|href)="([^"]+)"', readme)
    relative = [t for t in targets if not re.match(r"(https?://|mailto:|#)", t)]
    assert relative == []


def test_the_meta_distribution_sdist_holds_only_the_cli():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["sdist"]
    assert sorted(config["only-include"]) == ["LICENSE", "README.md", "VERSION", "pyproject.toml", "src/kernelgym"]
