"""gymnasium.make(..., render_mode="rgb_array") without a warning, and examples/record_video.py."""

from __future__ import annotations

import pathlib
import sys
import warnings

import gymnasium
import pytest

import kernelgym.envs  # registers the gymnasium ids

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _render_mode_warnings(caught) -> list[str]:
    return [str(warning.message) for warning in caught if "render_mode" in str(warning.message)]


@pytest.mark.parametrize(
    "make",
    [
        lambda: gymnasium.make("kernelgym/CartPole-v1", render_mode="rgb_array"),
        lambda: gymnasium.make_vec(
            "kernelgym/CartPole-v1", num_envs=2, vectorization_mode="sync", render_mode="rgb_array"
        ),
        lambda: gymnasium.make_vec(
            "kernelgym/CartPole-v1",
            num_envs=2,
            vectorization_mode="vector_entry_point",
            backend="cpu",
            render_mode="rgb_array",
        ),
    ],
    ids=["make", "make_vec-sync", "make_vec-vector_entry_point"],
)
def test_rgb_array_is_a_declared_render_mode(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = make()
    assert _render_mode_warnings(caught) == []
    assert env.metadata["render_modes"] == ["rgb_array"] and env.metadata["render_fps"] == 50
    env.reset(seed=0)
    frames = env.render()
    first = frames[0] if isinstance(frames, tuple) else frames
    assert first.ndim == 3 and first.shape[-1] == 3
    env.close()


def test_an_env_without_a_renderer_still_refuses_rgb_array():
    # the class declares the mode (gymnasium reads it before making the env); each
    # instance narrows it to what its env renders, and refuses the mode before compiling
    without_renderer = [
        env_id for env_id in kernelgym.envs.list_envs() if kernelgym.envs.get_spec(env_id).render is None
    ]
    for env_id in without_renderer:
        with pytest.raises(ValueError, match=r"render_mode: expected None or one of \[\]"):
            gymnasium.make(f"kernelgym/{env_id}", render_mode="rgb_array")
    from kernelgym.envs.gymnasium_env import KernelGymnasiumEnv

    assert KernelGymnasiumEnv.metadata["render_modes"] == ["rgb_array"]


def test_record_video_example_writes_an_mp4(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import record_video

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        videos = record_video.record(tmp_path / "videos", episodes=1, max_episode_steps=40)
    assert _render_mode_warnings(caught) == []
    assert [video.name for video in videos] == ["kernelgym-CartPole-v1-episode-0.mp4"]
    header = videos[0].read_bytes()[:12]
    assert header[4:8] == b"ftyp"  # an MP4 container
    assert videos[0].stat().st_size > 1000
    sys.modules.pop("record_video", None)
