"""One version source: the repository's VERSION file, read by every distribution's build."""

import importlib
import pathlib
from importlib import metadata

import pytest
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = {
    "kernelgym-core": "core",
    "kernelgym-envs": "envs",
    "kernelgym-collectors": "collectors",
    "kernelgym-memory": "memory",
}


def test_no_pyproject_writes_a_version_and_each_reads_the_version_file():
    for project_dir in [ROOT, *(ROOT / "packages" / name for name in PACKAGES.values())]:
        pyproject = tomllib.loads((project_dir / "pyproject.toml").read_text())
        assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
        assert (project_dir / pyproject["tool"]["hatch"]["version"]["path"]).resolve() == ROOT / "VERSION"


@pytest.mark.parametrize("distribution", sorted(PACKAGES))
def test_installed_version_and_dunder_version_are_the_version_file(distribution):
    version = (ROOT / "VERSION").read_text().strip()
    assert metadata.version(distribution) == version
    assert importlib.import_module(f"kernelgym.{PACKAGES[distribution]}").__version__ == version
    assert metadata.version("kernelgym") == version
