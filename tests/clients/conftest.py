"""The clients tests: real RL libraries (pinned in tox's `clients` env) over kernelgym envs.

One torch thread: the training runs are small MLPs on a shared 2-core machine, where
more threads only fight for the cores.
"""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
