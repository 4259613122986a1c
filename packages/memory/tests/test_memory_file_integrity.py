"""Files are verified on load: digests over every byte of every format, exact csv, no trust in claimed sizes."""

import hashlib
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.memory import PrioritizedMemory, RandomMemory, files

FORMATS = ["pt", "npz", "csv"]


def small_memory(cls=RandomMemory, steps=4):
    memory = cls(3, 2, device="cpu", seed=0)
    memory.create_tensor("obs", 3)
    memory.create_tensor("actions", 1, torch.int8)
    for step in range(steps):
        memory.add_samples(
            obs=torch.arange(6, dtype=torch.float32).view(2, 3) / 7 + step,
            actions=torch.tensor([[step], [-step]], dtype=torch.int8),
        )
    return memory


def state(memory):
    """Everything a load may change, raw storage included (NaN compared by bits)."""
    tensors = {name: t.clone().view(torch.uint8) for name, t in memory.tensors.items()}
    extra = memory.get_priorities().clone() if isinstance(memory, PrioritizedMemory) else None
    return memory._position, memory.filled, sorted(memory.tensors), tensors, extra


def same_state(first, second):
    assert first[:3] == second[:3]
    assert all(torch.equal(first[3][name], second[3][name]) for name in first[3])
    assert (first[4] is None and second[4] is None) or torch.equal(first[4], second[4])


def reseal(meta: dict) -> str:
    """Metadata text with a correct ``metadata_sha256`` (canonical JSON: sorted keys, no spaces)."""
    meta = {key: value for key, value in meta.items() if key != "metadata_sha256"}
    canonical = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
    return json.dumps({**meta, "metadata_sha256": hashlib.sha256(canonical).hexdigest()})


def rewrite_metadata(path, change, seal=True):
    """Rewrite a file's metadata with ``change(meta)`` applied, arrays untouched."""
    if path.endswith(".csv"):
        first, rest = open(path).read().split("\n", 1)
        meta = json.loads(first[len("# kernelgym-memory ") :])
        change(meta)
        text = reseal(meta) if seal else json.dumps(meta)
        open(path, "w").write("# kernelgym-memory " + text + "\n" + rest)
    elif path.endswith(".npz"):
        with np.load(path) as archive:
            arrays = dict(archive)
        meta = json.loads(str(arrays.pop("metadata")))
        change(meta)
        np.savez(path, metadata=np.array(reseal(meta) if seal else json.dumps(meta)), **arrays)
    else:
        content = torch.load(path, weights_only=True)
        meta = json.loads(content["metadata"])
        change(meta)
        torch.save({**content, "metadata": reseal(meta) if seal else json.dumps(meta)}, path)


@pytest.mark.parametrize("format", FORMATS)
def test_a_changed_value_in_the_data_is_refused_and_nothing_changes(tmp_path, format):
    memory = small_memory()
    path = memory.save(str(tmp_path), format)
    data = bytearray(open(path, "rb").read())
    if format == "csv":  # a digit of a data row: the file still parses, with another value
        at = data.index(b"\n", data.index(b"\n") + 1) + 1
        at += next(i for i, byte in enumerate(data[at:]) if chr(byte) in "123456789")
        data[at] = ord("1") if data[at] != ord("1") else ord("2")
    else:  # a byte inside the stored obs tensor
        at = data.index(memory.tensors["obs"].numpy().tobytes()) + 5
        data[at] ^= 0x01
    open(path, "wb").write(bytes(data))
    target = small_memory(steps=1)
    before = state(target)
    with pytest.raises(ValueError, match="sha256|CRC"):  # npz members carry a CRC too
        target.load(path)
    same_state(before, state(target))


@pytest.mark.parametrize("format", FORMATS)
@settings(max_examples=25, deadline=None)
@given(flip=st.integers(0, 1 << 20), bit=st.integers(0, 7))
def test_a_flipped_bit_anywhere_is_refused_or_changes_nothing_loaded(tmp_path_factory, format, flip, bit):
    directory = tmp_path_factory.mktemp("flip")
    memory = small_memory(PrioritizedMemory)
    memory.update_priorities(torch.tensor([1, 4]), torch.tensor([3.0, 0.25]))
    path = memory.save(str(directory), format)
    data = bytearray(open(path, "rb").read())
    data[flip % len(data)] ^= 1 << bit
    open(path, "wb").write(bytes(data))
    target = small_memory(PrioritizedMemory, steps=1)
    before = state(target)
    try:
        target.load(path)
    except ValueError:
        same_state(before, state(target))
    else:  # the bit was outside what the file means (zip padding, a timestamp): the same memory
        same_state(state(memory), state(target))


# -- csv: exact round trip, values out of range refused -----------------------------------------

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.int8, torch.int64]


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES + [torch.bool, torch.uint8, torch.int16])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_format_restores_every_bit_of_every_written_value(tmp_path_factory, format, dtype, data):
    memory_size, num_envs, width = 3, 2, 2
    memory = RandomMemory(memory_size, num_envs, device="cpu")
    memory.create_tensor("x", width, dtype)
    cells = data.draw(st.integers(1, memory_size * num_envs))
    if dtype == torch.bool:
        values = torch.tensor(data.draw(st.lists(st.booleans(), min_size=cells * width, max_size=cells * width)))
    else:
        size = cells * width * dtype.itemsize
        raw = data.draw(st.binary(min_size=size, max_size=size))
        values = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype)
    memory.add_samples(x=values.view(cells, width))
    path = memory.save(str(tmp_path_factory.mktemp("exact")), format)
    copy = RandomMemory(memory_size, num_envs, device="cpu")
    copy.load(path)
    written = slice(0, len(memory))
    stored, loaded = memory.tensors_view["x"][written], copy.tensors_view["x"][written]
    assert torch.equal(stored.contiguous().view(torch.uint8), loaded.contiguous().view(torch.uint8))


def test_csv_writes_nan_payloads_and_negative_zero_exactly(tmp_path):
    memory = RandomMemory(2, 2, device="cpu")
    memory.create_tensor("x", 1)
    bits = torch.tensor([0x7FC00001, -0x400000, 0x7F800001, -0x80000000], dtype=torch.int32)  # -nan, -0.0
    memory.add_samples(x=bits.view(torch.float32).view(4, 1))
    copy = RandomMemory(2, 2, device="cpu")
    copy.load(memory.save(str(tmp_path), "csv"))
    assert copy.tensors["x"].view(torch.int32).view(-1).tolist() == bits.tolist()


def replace_cell(path, column, text):
    lines = open(path).read().splitlines()
    header = lines[1].split(",")
    row = lines[2].split(",")
    row[header.index(column)] = text
    lines[2] = ",".join(row)
    open(path, "w").write("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("dtype", "text"),
    [(torch.int8, "300"), (torch.int8, "-129"), (torch.uint8, "-1"), (torch.float16, "1e6"), (torch.float32, "1e300")],
)
def test_csv_values_out_of_the_dtypes_range_are_refused_not_wrapped(tmp_path, dtype, text):
    memory = RandomMemory(2, 2, device="cpu")
    memory.create_tensor("x", 1, dtype)
    memory.add_samples(x=torch.ones(2, 1, dtype=dtype))
    path = memory.save(str(tmp_path), "csv")
    replace_cell(path, "x.0", text)
    target = RandomMemory(2, 2, device="cpu")
    with pytest.raises(ValueError, match=rf"x\.0.*{dtype!s}.*{text}"):
        target.load(path)
    assert not target.tensors


# -- what a file claims is checked before it is used ----------------------------------------------


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("bad_name", ["__class__", "two words", "1st", "_tensor_x.y"])
def test_tensor_names_in_a_file_follow_create_tensors_rule(tmp_path, format, bad_name):
    memory = small_memory()
    snapshot = memory._snapshot()
    snapshot.tensors[bad_name] = snapshot.tensors.pop("obs")
    snapshot.keep_dimensions[bad_name] = snapshot.keep_dimensions.pop("obs")
    path = str(tmp_path / f"named.{format}")
    files.write_snapshot(path, snapshot, format)
    target = RandomMemory(3, 2, device="cpu")
    with pytest.raises(ValueError, match="tensor name"):
        target.load(path)
    assert not target.tensors


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("seal", [True, False])
def test_a_file_claiming_a_huge_memory_is_refused_before_allocating(tmp_path, format, seal):
    memory = RandomMemory(3, 2, device="cpu")
    memory.create_tensor("obs", 3)
    memory.add_samples(obs=torch.zeros(2, 3))  # not filled: a csv file holds one row
    path = memory.save(str(tmp_path), format)

    def huge(meta):
        meta["memory_size"] = 2**40
        meta["tensors"]["obs"]["shape"][0] = 2**40

    rewrite_metadata(path, huge, seal)
    with pytest.raises(ValueError, match=f"memory_size={2**40}, num_envs=2; this memory has memory_size=3"):
        RandomMemory(3, 2, device="cpu").load(path)


@pytest.mark.parametrize("format", FORMATS)
def test_a_file_claiming_huge_samples_is_refused_before_allocating(tmp_path, format):
    memory = RandomMemory(3, 2, device="cpu")
    memory.create_tensor("obs", 3)
    memory.add_samples(obs=torch.zeros(2, 3))
    path = memory.save(str(tmp_path), format)
    rewrite_metadata(path, lambda meta: meta["tensors"]["obs"]["shape"].__setitem__(2, 2**40))
    with pytest.raises(ValueError, match="the metadata claims"):
        RandomMemory(3, 2, device="cpu").load(path)


@pytest.mark.parametrize("format", ["pt", "npz"])  # csv files hold the written cells only
def test_loaded_priorities_on_unwritten_cells_are_refused(tmp_path, format):
    memory = small_memory(PrioritizedMemory, steps=2)  # 4 of 6 cells written
    snapshot = memory._snapshot()
    snapshot.extra["priority"][5] = 2.0
    path = str(tmp_path / f"priorities.{format}")
    files.write_snapshot(path, snapshot, format)
    target = small_memory(PrioritizedMemory, steps=1)
    before = state(target)
    with pytest.raises(ValueError, match="unwritten"):
        target.load(path)
    same_state(before, state(target))


@pytest.mark.parametrize("format", FORMATS)
@pytest.mark.parametrize("weight", [math.inf, 1e308, -1.0])
def test_loaded_priority_weights_must_sum_to_a_finite_total(tmp_path, format, weight):
    memory = small_memory(PrioritizedMemory, steps=2)
    snapshot = memory._snapshot()
    snapshot.extra["priority"][:4] = weight
    path = str(tmp_path / f"weights.{format}")
    files.write_snapshot(path, snapshot, format)
    with pytest.raises(ValueError, match="priority weights"):
        small_memory(PrioritizedMemory, steps=1).load(path)
