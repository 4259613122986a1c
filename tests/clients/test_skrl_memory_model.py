"""kernelgym's RandomMemory against skrl 2.1.1's own RandomMemory as the reference model.

The calls skrl's agents make (keyword arguments, `size=None` tensors, int64 actions into a
float32 tensor, None values) give the same tensors back from `sample_all`,
`sample_by_index` and `sample` (with the same torch seed) once the memory is full.
"""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import RandomMemory

# (name, size, dtype, dtype of the values an agent passes)
TENSORS = [
    ("observations", 3, torch.float32, torch.float32),
    ("states", None, torch.float32, None),
    ("actions", 1, torch.float32, torch.int64),  # PPO: discrete actions into float32
    ("rewards", 1, torch.float32, torch.float32),
    ("terminated", 1, torch.bool, torch.bool),
    ("next_states", None, torch.float32, None),
]


def values(dtype, size, num_envs, draw):
    if dtype is None:
        return None
    shape = (num_envs, size)
    if dtype == torch.bool:
        return torch.tensor(draw(st.lists(st.booleans(), min_size=num_envs * size, max_size=num_envs * size))).view(
            shape
        )
    integers = draw(st.lists(st.integers(-1000, 1000), min_size=num_envs * size, max_size=num_envs * size))
    return (torch.tensor(integers, dtype=torch.int64) if dtype == torch.int64 else torch.tensor(integers) / 8).view(
        shape
    )


def same(ours, theirs):
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        assert len(mine) == len(reference)
        for a, b in zip(mine, reference):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype == b.dtype and torch.equal(a, b)


@settings(max_examples=40, deadline=None)
@given(
    memory_size=st.integers(1, 5),
    num_envs=st.integers(1, 4),
    laps=st.integers(1, 2),
    mini_batches=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**31),
    replacement=st.booleans(),
    data=st.data(),
)
def test_kernelgym_memory_samples_what_skrls_memory_samples(
    memory_size, num_envs, laps, mini_batches, seed, replacement, data
):
    from skrl.memories.torch import RandomMemory as SkrlRandomMemory

    # `replacement` given to both: the defaults differ (skrl False, kernelgym True)
    ours = RandomMemory(memory_size=memory_size, num_envs=num_envs, device="cpu", replacement=replacement)
    theirs = SkrlRandomMemory(memory_size=memory_size, num_envs=num_envs, device="cpu", replacement=replacement)
    for memory in (ours, theirs):
        for name, size, dtype, _ in TENSORS:
            assert memory.create_tensor(name=name, size=size, dtype=dtype) is (size is not None)
    # laps of the whole memory: skrl's sample_all returns every cell in storage order
    for _ in range(laps * memory_size):
        samples = {name: values(source, size, num_envs, data.draw) for name, size, _, source in TENSORS}
        ours.add_samples(**samples)
        theirs.add_samples(**samples)
    names = [name for name, *_ in TENSORS]
    total = memory_size * num_envs
    batches = mini_batches if total % mini_batches == 0 else 1  # skrl drops a remainder, kernelgym keeps it
    same(ours.sample_all(names=names, mini_batches=batches), theirs.sample_all(names=names, mini_batches=batches))
    indexes = torch.tensor(data.draw(st.lists(st.integers(0, total - 1), min_size=1, max_size=8)))
    same(ours.sample_by_index(names=names, indexes=indexes), theirs.sample_by_index(names=names, indexes=indexes))
    # both draw torch.randint (with replacement) or torch.randperm from the global generator: same cells
    torch.manual_seed(seed)
    mine = ours.sample(names=names, batch_size=total, mini_batches=1)
    torch.manual_seed(seed)
    same(mine, theirs.sample(names=names, batch_size=total, mini_batches=1))
