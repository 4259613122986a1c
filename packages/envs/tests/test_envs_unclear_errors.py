"""make and set_params errors that name the argument, the expected and the received value (issue 36, class 7)."""

import numpy as np
import pytest

import kernelgym.envs as kge


def test_num_envs_past_what_a_launch_can_index_is_refused_before_any_allocation():
    with pytest.raises(ValueError, match=r"num_envs: expected an int in \[1, 2147483647\], got 1099511627776"):
        kge.make("CartPole-v1", 2**40, backend="cpu")


def test_a_meta_tensor_for_a_per_env_param_is_refused_naming_the_param():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="param 'length': expected numbers, a numpy array or a cpu tensor, got a meta"):
        kge.make("CartPole-v1", 4, backend="cpu", length=torch.ones(4, device="meta"))


@pytest.mark.skipif(
    "ImageMaze-v0" not in kge.list_envs(), reason="the example plugin (kernelgym-example-plugin) is not installed"
)
@pytest.mark.parametrize(
    "layout, received",
    [(np.zeros(7, np.uint8), "shape (7,) and dtype uint8"), (np.zeros((7, 7)), "shape (7, 7) and dtype float64")],
)
def test_a_constant_table_of_the_wrong_shape_or_dtype_names_both(layout, received):
    with pytest.raises(TypeError) as refused:
        kge.make("ImageMaze-v0", 1, backend="cpu", layout=layout)
    message = str(refused.value)
    assert "param 'layout': expected ndarray of 2 dims and a dtype that casts to uint8" in message
    assert f"got ndarray of {received}" in message


def test_capture_step_names_an_env_that_is_none():
    pytest.importorskip("torch")
    from kernelgym.envs.cuda_graph import capture_step

    with pytest.raises(TypeError, match=r"env: expected a KernelVectorEnv \(kernelgym.envs.make\), got NoneType None"):
        capture_step(None, lambda obs: obs, None)
