"""Fuzz of the launch surfaces (issue 25): bind, launch, FunctionManager and CUDADataManager.

A stateful hypothesis machine walks the surfaces with hostile inputs: wrong ``num_envs``;
short, overlapping, odd-dtype (big-endian, float128), read-only, broadcast, non-contiguous
arrays and tensors, tensors re-pointed after bind, huge scalars, absurd data shapes. Each
step asserts: no crash (a kernel writing past a buffer would kill pytest), and either an
error naming the bad argument or a result equal to numpy's. Only the tiny kernels of
`core_test_kernels` run, with the dtypes other tests compile them for.
"""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from core_test_kernels import affine, scaled_lookup, tally
from kernelgym.core import CUDADataManager, DataFeed, FunctionManager, bind

ERRORS = (ValueError, TypeError, IndexError, MemoryError)
# how an array is handed over, and why a kernel must refuse it (None: it must work)
X_KINDS = ("plain", "tensor", "strided", "big_endian", "float128")
OUT_KINDS = ("plain", "tensor", "read_only", "broadcast", "big_endian")
BIND_X_KINDS = ("plain", "tensor", "big_endian")  # bind compiles a program per type: keep to the C float64 one
BAD_KIND = {"big_endian", "float128", "read_only", "broadcast"}
# floats, and ints no launcher can take (refused before compiling): an int scale would compile anew
SCALES = st.one_of(st.floats(-100, 100), st.sampled_from([2**64, -(2**63) - 1, 2**70]))
BIND_SCALE = 2.0  # bound scalars are compiled in: one value, one compile


def hostile(values: np.ndarray, kind: str):
    """``values`` (float64) handed over as ``kind``: the values a kernel must see, or refuse."""
    if kind == "tensor":
        return torch.from_numpy(values)
    if kind == "strided":  # a non-contiguous view with the same values
        wide = np.zeros((values.shape[0], 2 * values.shape[1]))
        wide[:, ::2] = values
        return wide[:, ::2]
    if kind == "big_endian":
        return values.astype(">f8")
    if kind == "float128":
        return values.astype(np.longdouble)
    if kind == "read_only":
        values.flags.writeable = False
        return values
    if kind == "broadcast":
        return np.broadcast_to(values[:1], values.shape)
    return values


def outcome(call, causes):
    """Run ``call``: True when it worked; False when it raised an error naming one of ``causes``
    (the arguments that make it wrong); fail when it worked but should not have, or the
    error names none of them."""
    try:
        call()
    except ERRORS as error:
        assert causes, f"a valid launch raised {error!r}"
        assert any(name in str(error) for name in causes), f"{error!r} names none of {sorted(causes)}"
        return False
    assert not causes, f"expected an error naming one of {sorted(causes)}, got none"
    return True


def as_numpy(value):
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def affine_causes(num_envs, x, out, x_kind, out_kind, scale):
    """Why ``affine.launch(num_envs, x, out, scale, shift)`` must be refused (argument names)."""
    causes = set()
    # a launch names a value by its parameter name, or (before it reads the body) by position
    if x_kind in BAD_KIND or x.shape[0] < num_envs:
        causes |= {"x", "argument 0"}
    if out_kind in BAD_KIND or out.shape[0] < num_envs or (num_envs and out.shape[1] < x.shape[1]):
        causes |= {"out", "argument 1"}
    if isinstance(scale, int) and not -(2**63) <= scale < 2**64:
        causes |= {"scale", "argument 2"}
    return causes


class LaunchMachine(RuleBasedStateMachine):
    """Binds, launches and re-points arrays of a few envs; checks every outcome."""

    @initialize(num_envs=st.integers(0, 9))
    def start(self, num_envs):
        self.num_envs = num_envs
        self.bound = None  # (launch, x values, out handed over, out values, scale)

    def rows(self, data, label):
        return data.draw(st.integers(max(0, self.num_envs - 2), self.num_envs + 2), label=label)

    @rule(data=st.data(), x_kind=st.sampled_from(X_KINDS), out_kind=st.sampled_from(OUT_KINDS), scale=SCALES)
    def raw_launch(self, data, x_kind, out_kind, scale):
        n = self.num_envs
        columns = data.draw(st.integers(1, 3), label="columns")
        values = np.arange(self.rows(data, "x rows") * columns, dtype=np.float64).reshape(-1, columns)
        out_values = np.full((self.rows(data, "out rows"), data.draw(st.integers(1, 3), label="out columns")), -1.0)
        before = out_values.copy()
        x, out = hostile(values, x_kind), hostile(out_values, out_kind)
        causes = affine_causes(n, values, out_values, x_kind, out_kind, scale)
        if outcome(lambda: affine.launch("cpu", n, x, out, scale, 0.5), causes):
            expected = before.copy()
            if n:
                expected[:n, :columns] = values[:n] * scale + 0.5
            np.testing.assert_array_equal(as_numpy(out), expected)
        else:
            np.testing.assert_array_equal(as_numpy(out), before)  # refused before any kernel ran

    @rule(data=st.data(), x_kind=st.sampled_from(BIND_X_KINDS), out_kind=st.sampled_from(OUT_KINDS))
    def bind_affine(self, data, x_kind, out_kind):
        scale = BIND_SCALE
        values = np.arange(self.rows(data, "x rows") * 2, dtype=np.float64).reshape(-1, 2)
        out_values = np.zeros((self.rows(data, "out rows"), 2))
        x, out = hostile(values, x_kind), hostile(out_values, out_kind)
        causes = affine_causes(self.num_envs, values, out_values, x_kind, out_kind, scale)
        bound = []

        def bind_and_launch():  # a read-only array the body writes is refused at the first launch
            bound.append(
                bind(affine, {"x": x, "out": out, "scale": scale, "shift": 0.5}, backend="cpu", num_envs=self.num_envs)
            )
            bound[0]()

        if outcome(bind_and_launch, causes):
            self.bound = (bound[0], values, out, scale)

    @precondition(lambda self: self.bound is not None)
    @rule()
    def call_bound(self):
        launch, values, out, scale = self.bound
        as_numpy(out)[...] = -1.0
        launch()
        n = self.num_envs
        np.testing.assert_array_equal(as_numpy(out)[:n], values[:n] * scale + 0.5)
        assert (as_numpy(out)[n:] == -1.0).all()

    @precondition(lambda self: self.bound is not None and isinstance(self.bound[2], torch.Tensor))
    @rule(rows=st.integers(0, 12))
    def repoint_bound_tensor(self, rows):
        launch, _, out, _ = self.bound
        out.set_(torch.zeros(rows, 2, dtype=torch.float64))  # the memory the launch was bound to may go
        assert not outcome(launch, {"out"})
        self.bound = None

    @rule(data=st.data(), shift=st.integers(0, 2))
    def overlapping(self, data, shift):
        n = self.num_envs
        base = np.arange((n + shift) * 2, dtype=np.float64).reshape(-1, 2)
        x, out = base[shift:], base[:n]
        values = x.copy()
        # the same rows under two names are fine; rows shifted against each other race
        causes = {"x", "out"} if 0 < shift < n else set()
        how = data.draw(st.sampled_from(["launch", "bind"]), label="how")
        call = (
            (lambda: affine.launch("cpu", n, x, out, BIND_SCALE, 0.5))
            if how == "launch"
            else (
                lambda: bind(
                    affine, {"x": x, "out": out, "scale": BIND_SCALE, "shift": 0.5}, backend="cpu", num_envs=n
                )()
            )
        )
        if outcome(call, causes):
            np.testing.assert_array_equal(out, values[:n] * BIND_SCALE + 0.5)

    @rule(data=st.data(), num_agents=st.integers(0, 4))
    def agents(self, data, num_agents):
        n = self.num_envs
        totals = np.zeros(self.rows(data, "totals rows"))
        visits = np.zeros(
            (self.rows(data, "visits rows"), data.draw(st.integers(0, 5), label="visits columns")), np.int64
        )
        per_agent = np.zeros((n, data.draw(st.integers(0, 5), label="per_agent columns")), np.int64)
        causes = set()
        if n and totals.shape[0] < n:  # indexed by env: checked even when no agent runs
            causes.add("totals")
        if n and visits.shape[0] < n:
            causes.add("visits")
        if n and num_agents and visits.shape[1] < num_agents:
            causes.add("visits")
        if n and num_agents and per_agent.shape[1] < num_agents:
            causes.add("per_agent")
        hint = data.draw(st.sampled_from([None, "shared", "per_env"]), label="layout hint")
        how = data.draw(st.sampled_from(["launch", "bind"]), label="how")
        arrays = {"totals": totals, "visits": visits, "per_agent": per_agent}
        call = (
            (lambda: tally.launch("cpu", n, num_agents, totals, visits, per_agent))
            if how == "launch"
            else (
                lambda: bind(
                    tally,
                    arrays,
                    backend="cpu",
                    num_envs=n,
                    num_agents=num_agents,
                    layouts=None if hint is None else {"visits": hint, "per_agent": hint},
                )()
            )
        )
        if outcome(call, causes):
            assert n == 0 or visits.shape[1] >= num_agents  # (no env runs no agent: any columns will do)
            assert (visits[:n, :num_agents] == 1).all() and not visits[:n, num_agents:].any()
            np.testing.assert_array_equal(totals[:n], np.full(n, num_agents * (num_agents + 1) / 2))

    @rule(data=st.data())
    def per_call_rows(self, data):
        n = self.num_envs
        out = np.zeros((n, 2))
        launch = bind(
            affine,
            {"x": np.zeros((n, 2)), "out": out, "scale": BIND_SCALE, "shift": 0.5},
            backend="cpu",
            num_envs=n,
            per_call=("x",),
        )
        x = np.ones((self.rows(data, "x rows"), 2))
        if outcome(lambda: launch.as_function()(x), {"x"} if x.shape[0] < n else set()):
            np.testing.assert_array_equal(out, x[:n] * BIND_SCALE + 0.5)

    @rule(data=st.data())
    def function_manager(self, data):
        n = max(self.num_envs, 1)  # a data manager of 0 envs has no rows to launch over
        dm = CUDADataManager(num_envs=n, backend="cpu")
        dm.add_shared_constants({"table": np.array([[2.0], [3.0]])})
        dm.add_meta_info({"scale": 10.0})
        fm = FunctionManager(dm)
        fm.register("lookup", scaled_lookup)
        out = np.zeros(data.draw(st.integers(max(0, n - 2), n + 2), label="out rows"))
        if outcome(lambda: fm.launch("lookup", out, "table", "scale", 0.5), {"out"} if out.shape[0] < n else set()):
            np.testing.assert_array_equal(out[:n], np.array([2.0, 3.0])[np.arange(n) % 2] * 10.0 + 0.5)

    @rule(num_envs=st.sampled_from([-1, 2.5, True, 2**63, 2**64, "4", None]))
    def bad_num_envs(self, num_envs):
        x, out = np.zeros((4, 2)), np.zeros((4, 2))
        assert not outcome(lambda: affine.launch("cpu", num_envs, x, out, 1.0, 0.0), {"num_envs"})
        assert not outcome(
            lambda: bind(affine, {"x": x, "out": out, "scale": 1.0, "shift": 0.0}, backend="cpu", num_envs=num_envs),
            {"num_envs"},
        )

    # shapes numpy can describe (as broadcast views) but no memory holds
    @rule(
        shape=st.sampled_from([(2**28, 2**30), (2**59,), (3, 2**40), (2**20, 2**20, 2**10)]),
        dtype=st.sampled_from(["float64", ">f8", "longdouble", "U3"]),
        per_env=st.booleans(),
    )
    def data_manager_push(self, shape, dtype, per_env):
        dm = CUDADataManager(num_envs=3, episode_length=2**62, backend="cpu")
        data = np.broadcast_to(np.zeros((), dtype), shape) if np.dtype(dtype) == np.float64 else np.zeros(3, dtype)
        feed = DataFeed()
        feed.add_data("hostile", data, log_data_across_episode=per_env and data.shape[0] == 3)
        assert not outcome(lambda: dm.push_data_to_device(feed), {"hostile"})
        assert "hostile" not in dm.host_data

    @invariant()
    def nothing_crashed(self):
        assert self.num_envs >= 0  # reaching here after each step is the "no crash" property


TestLaunchFuzz = LaunchMachine.TestCase
TestLaunchFuzz.settings = settings(
    max_examples=25, stateful_step_count=8, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("scale", [1 + 2j, np.complex128(2j)])
def test_a_complex_scalar_a_float_body_cannot_store_is_named_not_dumped(scale):
    """Numba's typing dump becomes a TypeError naming the statement and the values' types."""
    from kernelgym.core.kernels import KernelTypingError

    x, out = np.ones((3, 2)), np.zeros((3, 2))
    launch = bind(affine, {"x": x, "out": out, "scale": scale, "shift": 0.0}, backend="cpu", num_envs=3)
    for _ in range(2):  # raised at each launch (where Numba raised its own), before any kernel runs
        with pytest.raises(TypeError, match=r"value 'scale': complex128"):
            launch()
    with pytest.raises(KernelTypingError, match=r"argument 2 'scale': complex128"):
        affine.launch("cpu", 3, x, out, scale, 0.0)
    assert not out.any()
