"""docs/envs/ holds exactly the pages tools/gen_env_pages.py makes from the built-in EnvSpecs.

Runs in the `minatar` tox env, which installs kernelgym-envs and kernelgym-minatar (every
built-in env); elsewhere it is skipped, saying so.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_env_pages_are_current():
    pytest.importorskip("kernelgym.minatar", reason="the MinAtar games are built-in envs: tox -e minatar")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_env_pages.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_every_built_in_env_has_a_page_with_its_spaces_and_params():
    pytest.importorskip("kernelgym.minatar", reason="the MinAtar games are built-in envs: tox -e minatar")
    import kernelgym.envs as kge
    from kernelgym.envs.registry import get_spec

    for env_id in kge.list_envs():
        spec = get_spec(env_id)
        if spec.distribution not in ("kernelgym-envs", "kernelgym-minatar"):
            continue
        text = (ROOT / "docs" / "envs" / f"{env_id}.md").read_text(encoding="utf-8")
        assert "| observation space |" in text and "| action space |" in text and "## Rules" in text
        assert "## Params" in text and "## Version notes" in text
        for field in spec.per_env_params:
            assert f"| `{field}` |" in text and "| yes |" in text
