"""``sin`` and ``cos`` that give the same bits on every backend.

``math.sin`` in a kernel is the backend's math library: glibc's on cpu, libdevice's
``__nv_sin``/``__nv_sinf`` on cuda. Both are accurate, but they are different functions:
on an H200, float32 Acrobot, Pendulum and MountainCar trajectories left their cpu twins
at the first or second step (libdevice's ``sinf`` is within 2 ulp, glibc's is correctly
rounded), while every basic operation (``+ - * /``, ``sqrt``, ``%``) agreed, being
correctly rounded by IEEE 754 on both. The functions here are built from those basic
operations alone, so with contraction off (`kernelgym.core.contraction`) they give the
same bits on cpu, sim and cuda, in kernels and in the references that call them.

``sin``, ``cos`` and ``sincos`` compute in float64 and return float64, whatever the
argument's type: within 2 ulp of the correctly rounded value for ``|x| < 2**19 * pi`` (the
tests check this against the math library), keeping their cross-backend bits, with a
growing absolute error, beyond; NaN beyond ``2**50``. The method is fdlibm's: Cody-Waite reduction by pi/2, with
pi/2 split in three parts (the first two of 33 bits, so that ``n * part`` is exact for
``|n| < 2**20``) and a compensated subtraction of the last two, then fdlibm's minimax
polynomials on ``[-pi/4, pi/4]``.

``sin_as``, ``cos_as`` and ``sincos_as`` take the env's scalar type ``real`` (see
`kernelgym.envs.spec.EnvSpec.precisions`) and compute in it: in float64 the functions above;
in float32 float32 arithmetic alone, so that a float32 GPU build does no float64 arithmetic
(Cephes' three-part reduction and polynomials: an absolute error below 1.2e-7 for
``|x| <= 1024``, below 1e-6 up to 65536; NaN beyond, where float32 angles are 0.008 rad
apart). They are plain ``njit`` functions, not inlined by Numba: an env's step may call them
dozens of times (Acrobot's RK4), and inlining each call multiplied its compile time.
"""

from __future__ import annotations

import math

import numba

__all__ = ["cos", "cos_as", "sin", "sin_as", "sincos", "sincos_as"]

_INVERSE_HALF_PI = 6.36619772367581382433e-01
_HALF_PI_1 = 1.57079632673412561417e00  # the first 33 bits of pi/2
_HALF_PI_2 = 6.07710050630396597660e-11  # the next 33 bits
_HALF_PI_2_TAIL = 2.02226624879595063154e-21  # pi/2 - _HALF_PI_1 - _HALF_PI_2
# y + 1.5 * 2**52 - 1.5 * 2**52 rounds y to the nearest integer (|y| < 2**51), with no
# float-to-int conversion (undefined for inf and NaN) and no libm call
_ROUND_TO_INTEGER = 6755399441055744.0
# beyond 2**50 float64 arguments are a quarter radian apart and the reduction above fails
_LARGEST_REDUCED = 2.0**50

# fdlibm's __kernel_sin and __kernel_cos coefficients (|error| < 2**-58 on [-pi/4, pi/4])
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11


@numba.njit(inline="always", cache=True)
def _reduce(x):
    """``(r, quadrant)``, float64: ``x = n * pi/2 + r`` with ``|r| <= pi/4`` (about) and
    ``quadrant = n mod 4`` in {0, 1, 2, 3}."""
    x = x * 1.0  # float64 from here on (a float32 argument would keep float32 arithmetic)
    if not abs(x) <= _LARGEST_REDUCED:  # inf, NaN, or too large to reduce: NaN, never a value out of [-1, 1]
        return math.nan, 0.0
    n = (x * _INVERSE_HALF_PI + _ROUND_TO_INTEGER) - _ROUND_TO_INTEGER
    # fdlibm's reduction: x - n * _HALF_PI_1 is exact (Sterbenz), then a compensated
    # subtraction of n * (_HALF_PI_2 + _HALF_PI_2_TAIL) keeps r accurate near the zeros too
    head = x - n * _HALF_PI_1
    part = n * _HALF_PI_2
    r = head - part
    tail = n * _HALF_PI_2_TAIL - ((head - r) - part)
    return r - tail, n % 4.0  # exact (an fmod of integers by a power of two, + 4.0 for a negative n)


@numba.njit(inline="always", cache=True)
def _sincos64(x):
    # inlined once into `sincos` and once into `sincos_as`, whose float32 build then drops it
    r, quadrant = _reduce(x)
    z = r * r
    s = r + z * r * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    half_z = 0.5 * z
    w = 1.0 - half_z
    c = w + (((1.0 - w) - half_z) + z * (z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6)))))))
    if quadrant == 0.0:
        return s, c
    if quadrant == 1.0:
        return c, -s
    if quadrant == 2.0:
        return -s, -c
    return -c, s


@numba.njit(cache=True)
def sincos(x):
    """``(sin(x), cos(x))`` as float64, the same bits on every backend.

    Parameters
    ----------
    x : float or int
        Any real scalar; computed in float64.

    Returns
    -------
    (float, float)
        NaN for NaN, infinite and ``|x| > 2**50`` (where float64 angles are a quarter radian
        apart).
    """
    return _sincos64(x)


@numba.njit(cache=True)
def sin(x):
    """``sin(x)`` as float64, the same bits on every backend (see `sincos`)."""
    return sincos(x)[0]


@numba.njit(cache=True)
def cos(x):
    """``cos(x)`` as float64, the same bits on every backend (see `sincos`)."""
    return sincos(x)[1]


# Cephes' sinf/cosf: pi/2 in three float32 parts (n * part exact for the n that |x| <= 65536 gives)
_HALF_PI_1_F32 = 1.5703125
_HALF_PI_2_F32 = 4.837512969970703125e-4
_HALF_PI_3_F32 = 7.54978995489188216e-8
# y + 1.5 * 2**23 - 1.5 * 2**23 rounds a float32 y to the nearest integer (|y| < 2**22)
_ROUND_TO_INTEGER_F32 = 12582912.0
# up to here the float32 reduction keeps the absolute error below 1e-6
_FLOAT32_REDUCTION_LIMIT = 65536.0


@numba.njit(cache=True)
def sincos_as(x, real):
    """``(sin(x), cos(x))`` of type ``real`` (``numpy.float64`` or ``numpy.float32``), computed
    in that precision; the same bits on every backend.

    Parameters
    ----------
    x : float
        Any real scalar.
    real : numpy scalar type
        The env's precision. float64 runs `sincos`. float32 runs float32 arithmetic alone: an
        absolute error below 1.2e-7 for ``|x| <= 1024``, below 1e-6 for ``|x| <= 65536``; NaN
        beyond (where float32 angles are 0.008 rad apart), for inf and for NaN.
    """
    if not real(16777217.0) == real(16777216.0):  # float64 (a constant: the other branch is dropped)
        s64, c64 = _sincos64(x)
        return real(s64), real(c64)  # real: both branches return the same type
    x = real(x)
    if not abs(x) <= real(_FLOAT32_REDUCTION_LIMIT):  # inf, NaN, or float32 angles 0.008 rad apart
        return real(math.nan), real(math.nan)
    n = (x * real(_INVERSE_HALF_PI) + real(_ROUND_TO_INTEGER_F32)) - real(_ROUND_TO_INTEGER_F32)
    r = ((x - n * real(_HALF_PI_1_F32)) - n * real(_HALF_PI_2_F32)) - n * real(_HALF_PI_3_F32)
    quadrant = n % real(4.0)
    z = r * r
    s = ((real(-1.9515295891e-4) * z + real(8.3321608736e-3)) * z - real(1.6666654611e-1)) * z * r + r
    c = (
        ((real(2.443315711809948e-5) * z - real(1.388731625493765e-3)) * z + real(4.166664568298827e-2)) * z * z
        - real(0.5) * z
        + real(1.0)
    )
    if quadrant == real(0.0):
        return s, c
    if quadrant == real(1.0):
        return c, -s
    if quadrant == real(2.0):
        return -s, -c
    return -c, s


@numba.njit(cache=True)
def sin_as(x, real):
    """``sin(x)`` of type ``real``, computed in that precision (see `sincos_as`)."""
    return sincos_as(x, real)[0]


@numba.njit(cache=True)
def cos_as(x, real):
    """``cos(x)`` of type ``real``, computed in that precision (see `sincos_as`)."""
    return sincos_as(x, real)[1]
