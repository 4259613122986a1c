"""`KernelSB3VecEnv.set_attr`: a setting either takes effect or raises naming the attribute."""

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from kernelgym.envs.sb3 import KernelSB3VecEnv


@pytest.fixture
def venv():
    venv = KernelSB3VecEnv("CartPole-v1", 2, backend="cpu", seed=0)
    yield venv
    venv.close()


def test_max_episode_steps_set_through_set_attr_truncates_the_episodes(venv):
    venv.set_attr("max_episode_steps", 3)
    assert venv.get_attr("max_episode_steps") == [3, 3]
    venv.reset()
    for step in range(1, 4):
        _, _, dones, infos = venv.step(np.zeros(2, np.int64))
        assert list(dones) == [step == 3] * 2  # pole upright for 3 steps: only the time limit ends them
    assert [info["TimeLimit.truncated"] for info in infos] == [True, True]
    assert [info["episode"]["l"] for info in infos] == [3, 3]


@pytest.mark.parametrize(
    "name, value",
    [
        ("params", None),
        ("num_envs", 5),
        ("autoreset_mode", "next_step"),
        ("state", {}),
        ("precision", "float32"),
    ],
)
def test_a_fixed_attribute_set_through_set_attr_raises_naming_it(venv, name, value):
    before = venv.get_attr(name)
    with pytest.raises(AttributeError, match=name):
        venv.set_attr(name, value)
    assert venv.get_attr(name) == before or name == "state"  # unchanged (state: a fresh mapping each read)


def test_an_unknown_or_private_attribute_set_through_set_attr_raises(venv):
    for name in ("no_such_attribute", "_buffers"):
        with pytest.raises(AttributeError, match=name):
            venv.set_attr(name, 1)


def test_render_mode_takes_only_the_envs_render_modes(venv):
    venv.set_attr("render_mode", "rgb_array")
    assert venv.get_attr("render_mode") == ["rgb_array"] * 2
    assert venv.get_images()[0].ndim == 3
    with pytest.raises(ValueError, match="render_mode"):
        venv.set_attr("render_mode", "human")
