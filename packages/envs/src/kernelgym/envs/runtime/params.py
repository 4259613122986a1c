"""Per-env params: one table of values the kernels read per env, written at run time.

An env lists in `EnvSpec.per_env_params` the float fields of its params record that may
differ from env to env. The runtime keeps them in one ``(F, num_envs)`` table on the
backend, in the env's ``real`` dtype (float64 for an env that declares no precisions),
one contiguous row per field (so a GPU's threads read a row coalesced), and binds each
such field as a `kernelgym.core.binding.PerEnvScalar` of its row: a kernel body still
takes the field as a scalar. Changing the table (``set_params``) needs no recompilation.
Each row has a stride, 0 while every env holds the same value (every env then reads the
row's first entry: one cached load, not a stream over the row) and 1 once they differ
or the field is randomized: a table whose fields mostly agree costs next to nothing.

``randomize={"length": (0.4, 0.6)}`` draws fields at each reset of an env, inside the
reset launch and before the env's own reset body, from that env's own stream: for each
per-env field in the params record's field order whose range is active, one
``rng.uniform_range_as(rng_states, i, low, high, real)``. The ranges live in a small
backend array, so ``set_randomize`` changes them with no recompilation.
`reference_draw` makes the same draws for a reference from the env's own stream.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from kernelgym.core import env_kernel, rng
from kernelgym.core.arrays import is_torch_tensor, to_backend
from kernelgym.core.binding import PerEnvScalar
from kernelgym.envs.runtime.state_io import checked_cast
from kernelgym.envs.spec import PRECISIONS

__all__ = ["ParamsTable", "draw_params", "reference_draw", "split_params"]


@env_kernel
def draw_params(i, rng_states, _params_table, _randomize_ranges, _randomize_active, _params_real):
    """Draw env ``i``'s randomized fields from its own stream (fields in table order)."""
    for f in range(_params_table.shape[0]):
        if _randomize_active[f]:
            _params_table[f, i] = rng.uniform_range_as(
                rng_states, i, _randomize_ranges[f, 0], _randomize_ranges[f, 1], _params_real
            )


def split_params(spec, params: dict) -> tuple[dict, dict]:
    """``make``'s params keyword arguments as (scalars, arrays): arrays only for per-env fields.

    Raises
    ------
    TypeError
        An array (or list) for a field that is a compile-time constant of the env.
    """
    scalars, arrays = {}, {}
    tables = (
        {
            field.name
            for field in dataclasses.fields(spec.params)
            if isinstance(getattr(spec.params, field.name), np.ndarray)
        }
        if spec.params is not None
        else set()
    )
    for name, value in params.items():
        if name in tables:  # a constant table: one array for every env, validated as the record's field
            scalars[name] = value
        elif isinstance(value, (np.ndarray, list, tuple)) or (
            hasattr(value, "shape") and bool(getattr(value, "ndim", 0))
        ):
            if name not in spec.per_env_params:
                raise TypeError(
                    f"make({spec.id!r}) param {name!r}: got an array, but {name!r} is a compile-time constant "
                    f"of the env (one scalar for every env; change it with a new make()); the fields that take "
                    f"one value per env are {list(spec.per_env_params)}"
                )
            arrays[name] = value
        else:
            scalars[name] = value
    return scalars, arrays


def reference_draw(spec, params, randomize: dict, rng_states, real=np.float64):
    """``params`` with the fields ``randomize`` names drawn as an env's reset draws them.

    ``rng_states`` is the env's own stream (``(1, 2)``, row 0), advanced in place; the
    draws happen before the reference's own reset draws, as in the reset launch.
    """
    drawn = {}
    for name in spec.per_env_params:
        if name in randomize:
            low, high = randomize[name]
            drawn[name] = float(rng.uniform_range_as(rng_states, 0, real(low), real(high), real))
    return dataclasses.replace(params, **drawn) if drawn else params


class ParamsTable:
    """The per-env params of one `KernelVectorEnv` (see the module docstring).

    Parameters
    ----------
    spec : EnvSpec
    params : params record
        The scalar params (defaults and scalar overrides).
    arrays : dict of str to array_like
        ``(num_envs,)`` values of per-env fields.
    num_envs : int
    backend : str
    precision : str or None
    randomize : dict of str to (low, high), or None
    """

    def __init__(self, spec, params, arrays: dict, num_envs: int, backend: str, precision, randomize):
        self.spec = spec
        self.num_envs = num_envs
        self.backend = backend
        self.fields = tuple(spec.per_env_params)
        self.real = PRECISIONS[precision] if precision is not None else np.float64
        self.base = params
        host = np.empty((len(self.fields), num_envs), self.real)
        for row, name in enumerate(self.fields):
            host[row] = getattr(params, name)
        checked = self._checked(arrays, "make")
        for name, values in checked.items():
            host[self.fields.index(name)] = values
        self.randomized = randomize is not None
        if self.randomized and spec.kernel_layout != "env":
            raise ValueError(
                f"randomize: env {spec.id!r} has kernel_layout={spec.kernel_layout!r}; randomize= "
                f"draws from one stream per env and supports env-layout envs only (set per-env "
                f"values with set_params instead)"
            )
        ranges, active = self._ranges({} if randomize is None else randomize)
        self._active = active
        self.table = to_backend(host, backend)
        self.ranges = to_backend(ranges, backend)
        self.active = to_backend(active, backend)
        self.strides = to_backend(
            np.array([self._stride(row, host[row]) for row in range(len(self.fields))], np.int64), backend
        )
        self.randomize = self._randomize_dict(ranges, active)

    def values(self) -> dict:
        """The kernel values: each per-env field's row, and the randomize draw's own names."""
        values: dict[str, Any] = {
            name: PerEnvScalar(self.table[row], self.strides[row : row + 1]) for row, name in enumerate(self.fields)
        }
        values.update(
            _params_table=self.table,
            _randomize_ranges=self.ranges,
            _randomize_active=self.active,
            _params_real=self.real,
        )
        return values

    def layouts(self) -> dict:
        return {"_randomize_ranges": "shared", "_randomize_active": "shared", "_params_table": "shared"}

    def set(self, write, values: dict) -> None:
        """Write per-env fields (scalars or ``(num_envs,)`` arrays) through ``write(array, host)``."""
        checked = self._checked(values, "set_params")
        for name, host in checked.items():
            row = self.fields.index(name)
            write(self.table[row], host)
            write(self.strides[row : row + 1], self._stride(row, host))

    def set_randomize(self, write, randomize: dict) -> None:
        """Replace the randomize ranges (fields left out are no longer drawn)."""
        if not self.randomized:
            raise RuntimeError(
                f"set_randomize: env {self.spec.id!r} was made without randomize=; make it with "
                f"randomize={{}} (or ranges) to compile the reset draw"
            )
        ranges, active = self._ranges(randomize)
        write(self.ranges, ranges)
        write(self.active, active)
        for row in np.flatnonzero(active & ~self._active):  # a field drawn per env from now on
            write(self.strides[row : row + 1], 1)
        self._active = self._active | active  # drawn values stay in the table: their rows keep stride 1
        self.randomize = self._randomize_dict(ranges, active)

    def host(self, read) -> np.ndarray:
        """The table as a host ``(F, num_envs)`` array."""
        return np.array(read(self.table))

    def env_params(self, read, index: int):
        """Env ``index``'s params record (its current per-env values)."""
        return self.envs_params(read, [index])[0]

    def envs_params(self, read, indices) -> list:
        """The params records of envs ``indices``, from one host copy of the table."""
        host = self.host(read)
        return [
            dataclasses.replace(self.base, **{name: float(host[row, index]) for row, name in enumerate(self.fields)})
            for index in indices
        ]

    def _stride(self, row: int, values) -> int:
        """0 while every env reads the same value (entry 0 for all), 1 once they may differ."""
        return int(bool(self._active[row]) or bool(np.any(values != values[0])))

    # ------------------------------------------------------------------ checks
    def _checked(self, values: dict, where: str) -> dict:
        """Each value as a finite ``(num_envs,)`` array of ``real``, the record's own checks passed on
        the smallest and the largest values; nothing is written before every value passed."""
        if not isinstance(values, dict):
            raise TypeError(f"{where}: expected params fields as keyword arguments, got {type(values).__name__}")
        checked = {}
        for name, value in values.items():
            if name not in self.fields:
                raise TypeError(
                    f"{where}: param {name!r} cannot change per env or at run time (a compile-time "
                    f"constant of the env; change it with a new make()); expected one of "
                    f"{list(self.fields)}"
                )
            if is_torch_tensor(value) and value.device.type != "cpu":
                raise TypeError(
                    f"{where} param {name!r}: expected numbers, a numpy array or a cpu tensor, "
                    f"got a {value.device.type} tensor"
                )
            array = np.asarray(value)
            if array.dtype.kind not in "fiu":
                raise TypeError(f"{where} param {name!r}: expected float values, got dtype {array.dtype}")
            if array.shape not in ((), (self.num_envs,)):
                raise ValueError(
                    f"{where} param {name!r}: expected a scalar or shape ({self.num_envs},), got shape {array.shape}"
                )
            # a finite value the table's dtype cannot hold is named as an overflow, not stored as inf
            array = np.broadcast_to(checked_cast(array, self.real, f"{where} param {name!r}"), (self.num_envs,))
            if not np.all(np.isfinite(array)):
                raise ValueError(f"{where} param {name!r}: expected finite values, got {array[~np.isfinite(array)][0]}")
            checked[name] = np.ascontiguousarray(array)
        for pick in (np.min, np.max):
            self._record_check(where, {name: float(pick(array)) for name, array in checked.items()})
        return checked

    def _record_check(self, where: str, values: dict):
        try:
            return dataclasses.replace(self.base, **values)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: {values} rejected by {type(self.base).__name__}: {error}") from error

    def _ranges(self, randomize: dict):
        if not isinstance(randomize, dict):
            raise TypeError(f"randomize: expected a dict of field name to (low, high), got {type(randomize).__name__}")
        ranges = np.zeros((len(self.fields), 2), self.real)
        active = np.zeros(len(self.fields), np.bool_)
        for name, bounds in randomize.items():
            if name not in self.fields:
                raise ValueError(
                    f"randomize: param {name!r} cannot be drawn per env; expected one of {list(self.fields)}"
                )
            try:
                low, high = (float(bound) for bound in bounds)
            except (TypeError, ValueError):
                raise TypeError(
                    f"randomize[{name!r}]: expected a (low, high) pair of numbers, got {bounds!r}"
                ) from None
            if not (math.isfinite(low) and math.isfinite(high) and low <= high):
                raise ValueError(f"randomize[{name!r}]: expected finite low <= high, got ({low}, {high})")
            # the draw computes low + (high - low) * u in the table's dtype: both bounds and the
            # width must be finite there, or every draw is inf (as set_params refuses the values)
            low_real, high_real = checked_cast(np.array([low, high]), self.real, f"randomize[{name!r}]")
            with np.errstate(over="ignore"):
                width = high_real - low_real
            if not np.isfinite(width):
                raise ValueError(
                    f"randomize[{name!r}]: expected a range whose width high - low is finite in "
                    f"{np.dtype(self.real)} (at most {float(np.finfo(np.dtype(self.real).type).max):g}), "
                    f"got ({low}, {high})"
                )
            for bound in (low, high):
                self._record_check(f"randomize[{name!r}]", {name: bound})
            row = self.fields.index(name)
            ranges[row] = low, high
            active[row] = True
        return ranges, active

    def _randomize_dict(self, ranges, active) -> dict:
        return {
            name: (float(ranges[row, 0]), float(ranges[row, 1])) for row, name in enumerate(self.fields) if active[row]
        }
