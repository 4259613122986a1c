"""The pages and files a newcomer reads first say what is true of the repository."""

import re
import subprocess
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PYPROJECTS = [ROOT / "pyproject.toml", *sorted((ROOT / "packages").glob("*/pyproject.toml"))]


def git_tags() -> set[str]:
    result = subprocess.run(["git", "tag", "--list"], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(result.stdout.split())


def test_changelog_links_name_only_tags_that_exist():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    named = set(re.findall(r"/(?:releases/tag|tree)/([^\s)/]+)", text))
    for start, end in re.findall(r"/compare/([^\s)]+?)\.\.\.([^\s)]+)", text):
        named |= {start, end}
    missing = sorted(named - git_tags() - {"HEAD", "main"})
    assert not missing, f"CHANGELOG.md links to tags that do not exist: {missing}"


def test_citation_names_the_version_file():
    citation = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    version = (ROOT / "VERSION").read_text(encoding="utf-8").strip()
    assert re.search(rf"^version: {re.escape(version)}$", citation, re.M), "CITATION.cff: version is not VERSION's"
    assert re.search(r"^cff-version: 1\.2\.0$", citation, re.M)


def test_install_page_states_the_python_the_metadata_requires_and_ci_tests():
    required = {tomllib.loads(path.read_text())["project"]["requires-python"] for path in PYPROJECTS}
    assert required == {">=3.10"}, f"the packages disagree on requires-python: {required}"
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert "Python 3.10 or later" in install and "CI tests Python\n3.11" in install
    assert "3.11+" not in install  # the old claim, against ">=3.10"


def test_install_page_does_not_say_the_meta_package_brings_minatar():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not any(d.startswith("kernelgym-minatar") for d in dependencies)
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    row = next(line for line in install.splitlines() if line.startswith("| `pip install kernelgym` |"))
    assert "not minatar" in row


def test_the_landing_page_has_the_install_line_and_a_short_quickstart():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert "pip install -r requirements.txt" in index
    quickstart = index.split("## Quickstart", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in quickstart.splitlines() if line.strip()]) <= 12
    assert "MkDocs" not in index  # why the docs tool was chosen is for developers, not on the landing page
