"""Record a video of CartPole episodes with gymnasium's ``RecordVideo`` wrapper.

A kernelgym env made with ``gymnasium.make("kernelgym/<id>", render_mode="rgb_array")``
renders RGB frames, so gymnasium's own wrappers record it like any gymnasium env.
Writing MP4 files needs moviepy: ``pip install "kernelgym-envs[video]"``.

Run it::

    python examples/record_video.py --video-folder videos --episodes 2
"""

from __future__ import annotations

import argparse
import pathlib

import gymnasium
from gymnasium.wrappers import RecordVideo

import kernelgym.envs  # noqa: F401  (registers the "kernelgym/<id>" ids with gymnasium)


def balance(obs) -> int:
    """A hand-written CartPole policy: push the cart the way the pole falls."""
    angle, angular_velocity = obs[2], obs[3]
    return int(angle + 0.5 * angular_velocity > 0)


def record(
    video_folder: str | pathlib.Path,
    episodes: int = 1,
    env_id: str = "kernelgym/CartPole-v1",
    max_episode_steps: int = 200,
    seed: int = 0,
) -> list[pathlib.Path]:
    """Play ``episodes`` episodes of ``env_id`` with `balance` and record each as an MP4.

    Returns
    -------
    list of pathlib.Path
        The video files written, in ``video_folder``.
    """
    env = gymnasium.make(env_id, render_mode="rgb_array", max_episode_steps=max_episode_steps)
    env = RecordVideo(
        env, video_folder=str(video_folder), episode_trigger=lambda episode: True, name_prefix=env_id.replace("/", "-")
    )
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(balance(obs))
            done = terminated or truncated
    env.close()  # writes the last video
    return sorted(pathlib.Path(video_folder).glob("*.mp4"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video-folder", default="videos", help="where the MP4 files go (default: %(default)s)")
    parser.add_argument("--episodes", type=int, default=1, help="episodes to record (default: %(default)s)")
    parser.add_argument("--max-episode-steps", type=int, default=200, help="time limit (default: %(default)s)")
    options = parser.parse_args(argv)
    for path in record(options.video_folder, options.episodes, max_episode_steps=options.max_episode_steps):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
