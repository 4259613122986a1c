"""The task protocol (RLStepResult, Task, TaskSampler), GymTaskSampler and tile_images."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.collectors import (
    GymTaskSampler,
    RLStepResult,
    Task,
    TaskProtocol,
    TaskSampler,
    TaskSamplerProtocol,
    tile_images,
)


class WalkTask(Task):
    """Terminates when the walk reaches ``goal``; the observation is the position."""

    def __init__(self, goal, max_steps=None):
        super().__init__(max_steps=max_steps)
        self.goal = goal
        self.position = 0

    @property
    def action_space(self):
        return gym.spaces.Discrete(2)

    def get_observations(self):
        return self.position

    def _step(self, action):
        self.position += 1 if action else 0
        reached = self.position >= self.goal
        return RLStepResult(self.position, 1.0, reached, {})


# -- RLStepResult ------------------------------------------------------------------------------


@given(done=st.booleans(), terminated=st.none() | st.booleans(), truncated=st.booleans())
def test_step_result_accepts_exactly_consistent_flags(done, terminated, truncated):
    effective_terminated = (done and not truncated) if terminated is None else terminated
    if done == (effective_terminated or truncated):
        result = RLStepResult("obs", 1.0, done, None, terminated, truncated)
        assert (result.done, result.terminated, result.truncated) == (done, effective_terminated, truncated)
        assert pickle.loads(pickle.dumps(result)) == result
        assert type(pickle.loads(pickle.dumps(result))) is RLStepResult
    else:
        with pytest.raises(ValueError, match="done must equal terminated or truncated"):
            RLStepResult("obs", 1.0, done, None, terminated, truncated)


def test_step_result_clone_is_validated():
    result = RLStepResult("obs", 1.0, False, {})
    assert result.clone(reward=2.0).reward == 2.0
    with pytest.raises(ValueError):
        result.clone(done=True, terminated=False)  # neither terminated nor truncated


# -- Task ----------------------------------------------------------------------------------------


@given(goal=st.integers(1, 30), max_steps=st.none() | st.integers(1, 30))
def test_task_terminates_or_truncates_at_the_right_step(goal, max_steps):
    task = WalkTask(goal, max_steps)
    assert isinstance(task, TaskProtocol)
    for step in range(1, 61):
        result = task.step(1)
        ends_terminal = step >= goal
        ends_truncated = not ends_terminal and max_steps is not None and step >= max_steps
        assert (result.terminated, result.truncated) == (ends_terminal, ends_truncated)
        if result.done:
            break
    assert task.is_done() and task.num_steps_taken() == step == min(goal, max_steps or goal)
    assert task.metrics() == {"ep_length": step, "reward": float(step)}
    with pytest.raises(RuntimeError, match="cannot step a finished WalkTask"):
        task.step(1)


def test_task_rejects_bad_max_steps_and_renders_only_when_implemented():
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        WalkTask(3, max_steps=0)
    with pytest.raises(NotImplementedError, match="WalkTask does not render"):
        WalkTask(3).render()


# -- GymTaskSampler ----------------------------------------------------------------------------


def _episode(sampler, actions):
    task = sampler.next_task()
    observations = [task.get_observations()]
    for action in actions:
        result = task.step(action)
        observations.append(result.observation)
        if result.done:
            break
    return np.array(observations)


def test_gym_sampler_is_a_task_sampler_and_reproducible_by_seed():
    first, second, other = (GymTaskSampler("CartPole-v1", seed=s) for s in (7, 7, 8))
    assert isinstance(first, TaskSampler) and isinstance(first, TaskSamplerProtocol)
    actions = [0, 1] * 20
    np.testing.assert_array_equal(_episode(first, actions), _episode(second, actions))
    assert not np.array_equal(_episode(first, actions)[0], _episode(other, actions)[0])
    first.set_seed(3)
    second.set_seed(3)
    np.testing.assert_array_equal(_episode(first, actions), _episode(second, actions))


def test_gym_sampler_counts_tasks_and_resets():
    sampler = GymTaskSampler("CartPole-v1", seed=0, max_tasks=2)
    assert sampler.length == 2 and sampler.last_sampled_task is None
    first = sampler.next_task()
    assert sampler.last_sampled_task is first and sampler.length == 1
    assert sampler.next_task() is not None and sampler.length == 0
    assert sampler.next_task() is None
    sampler.reset()
    assert sampler.length == 2 and sampler.next_task() is not None
    assert GymTaskSampler("CartPole-v1").length == float("inf")


def test_gym_task_truncates_at_max_steps_and_reports_spaces():
    sampler = GymTaskSampler(lambda: gym.make("CartPole-v1"), seed=1, max_steps=3)
    task = sampler.next_task()
    assert task.action_space == gym.spaces.Discrete(2)
    assert task.observation_space.shape == (4,)
    results = [task.step(i % 2) for i in range(3)]
    assert [r.truncated for r in results] == [False, False, True]
    assert not any(r.terminated for r in results)


class ColorEnv(gym.Env):
    """A one-step env whose frame is filled with ``color`` (no pygame needed)."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(1)
    render_mode = "rgb_array"

    def __init__(self, color=0):
        self.color = color

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 0, 0.0, True, False, {}

    def render(self):
        return np.full((4, 6, 3), self.color, dtype=np.uint8)


def test_gym_task_renders_in_the_env_mode_only():
    task = GymTaskSampler(lambda: ColorEnv(9), seed=0).next_task()
    frame = task.render("rgb_array")
    assert frame.shape == (4, 6, 3) and (frame == 9).all()
    with pytest.raises(ValueError, match="render_mode 'rgb_array'"):
        task.render("human")


@pytest.mark.parametrize(
    ("env", "kwargs", "match"),
    [
        (3, {}, "env must be a gymnasium id"),
        (lambda: "not an env", {}, "must return a gymnasium.Env"),
        (lambda: gym.make("CartPole-v1"), {"render_mode": "rgb_array"}, "make_kwargs only apply"),
    ],
)
def test_gym_sampler_rejects_bad_env_arguments(env, kwargs, match):
    with pytest.raises(TypeError, match=match):
        GymTaskSampler(env, **kwargs)


def test_gym_sampler_rejects_bad_max_tasks():
    with pytest.raises(ValueError, match="max_tasks must be a non-negative int"):
        GymTaskSampler("CartPole-v1", max_tasks=-1)


# -- tile_images -------------------------------------------------------------------------------


@settings(max_examples=30)
@given(count=st.integers(1, 10), height=st.integers(1, 5), width=st.integers(1, 5))
def test_tile_images_places_each_image_in_its_cell(count, height, width):
    images = [np.full((height, width, 3), k + 1, dtype=np.uint8) for k in range(count)]
    tile = tile_images(images)
    columns = int(np.ceil(np.sqrt(count)))
    rows = int(np.ceil(count / columns))
    assert tile.shape == (rows * height, columns * width, 3)
    for k in range(rows * columns):
        row, column = divmod(k, columns)
        cell = tile[row * height : (row + 1) * height, column * width : (column + 1) * width]
        assert (cell == (k + 1 if k < count else 0)).all()


def test_tile_images_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one image"):
        tile_images([])
    with pytest.raises(ValueError, match=r"\(H, W, C\)"):
        tile_images([np.zeros((2, 2, 3)), np.zeros((2, 2, 4))])
