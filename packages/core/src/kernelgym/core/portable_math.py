"""``sin`` and ``cos`` that give the same bits on every backend.

``math.sin`` in a kernel is the backend's math library: glibc's on cpu, libdevice's
``__nv_sin``/``__nv_sinf`` on cuda. Both are accurate, but they are different functions:
on an H200, float32 Acrobot, Pendulum and MountainCar trajectories left their cpu twins
at the first or second step (libdevice's ``sinf`` is within 2 ulp, glibc's is correctly
rounded), while every basic operation (``+ - * /``, ``sqrt``, ``%``) agreed, being
correctly rounded by IEEE 754 on both. The functions here are built from those basic
operations alone, so with contraction off (`kernelgym.core.contraction`) they give the
same bits on cpu, sim and cuda, in kernels and in the references that call them.

They compute in float64 and return float64, whatever the argument's type: cast the result
to the env's precision (``real(cos(theta))``). Rounded to float32 they are almost always the
correctly rounded float32 value; in float64 they are within 2 ulp of it for
``|x| < 2**19 * pi`` (the tests check both against the math library), and keep their
cross-backend bits, with a growing absolute error, beyond.

The method is fdlibm's: Cody-Waite reduction by pi/2, with pi/2 split in three parts (the
first two of 33 bits, so that ``n * part`` is exact for ``|n| < 2**20``) and a compensated
subtraction of the last two, then fdlibm's
minimax polynomials for sin and cos on ``[-pi/4, pi/4]``.
"""

from __future__ import annotations

import numba

__all__ = ["cos", "cos_as", "sin", "sin_as", "sincos", "sincos_as"]

_INVERSE_HALF_PI = 6.36619772367581382433e-01
_HALF_PI_1 = 1.57079632673412561417e00  # the first 33 bits of pi/2
_HALF_PI_2 = 6.07710050630396597660e-11  # the next 33 bits
_HALF_PI_2_TAIL = 2.02226624879595063154e-21  # pi/2 - _HALF_PI_1 - _HALF_PI_2
# y + 1.5 * 2**52 - 1.5 * 2**52 rounds y to the nearest integer (|y| < 2**51), with no
# float-to-int conversion (undefined for inf and NaN) and no libm call
_ROUND_TO_INTEGER = 6755399441055744.0

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
        NaN for NaN and infinite ``x``.
    """
    x = x * 1.0  # float64 from here on (a float32 argument would keep float32 arithmetic)
    n = (x * _INVERSE_HALF_PI + _ROUND_TO_INTEGER) - _ROUND_TO_INTEGER
    # fdlibm's reduction: x - n * _HALF_PI_1 is exact (Sterbenz), then a compensated
    # subtraction of n * (_HALF_PI_2 + _HALF_PI_2_TAIL) keeps r accurate near the zeros too
    head = x - n * _HALF_PI_1
    part = n * _HALF_PI_2
    r = head - part
    tail = n * _HALF_PI_2_TAIL - ((head - r) - part)
    r = r - tail
    z = r * r
    s = r + z * r * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
    half_z = 0.5 * z
    w = 1.0 - half_z
    c = w + (((1.0 - w) - half_z) + z * (z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6)))))))
    quadrant = n % 4.0  # exact (an fmod of integers, then + 4.0 for a negative n): 0, 1, 2 or 3
    if quadrant == 0.0:
        return s, c
    if quadrant == 1.0:
        return c, -s
    if quadrant == 2.0:
        return -s, -c
    return -c, s


@numba.njit(cache=True)
def sin(x):
    """``sin(x)`` as float64, the same bits on every backend (see `sincos`)."""
    return sincos(x)[0]


@numba.njit(cache=True)
def cos(x):
    """``cos(x)`` as float64, the same bits on every backend (see `sincos`)."""
    return sincos(x)[1]


# Cephes' sinf/cosf: pi/2 in three float32 parts (n * part exact for the n that |x| <= 1024 gives)
_HALF_PI_1_F32 = 1.5703125
_HALF_PI_2_F32 = 4.837512969970703125e-4
_HALF_PI_3_F32 = 7.54978995489188216e-8
# y + 1.5 * 2**23 - 1.5 * 2**23 rounds a float32 y to the nearest integer (|y| < 2**22)
_ROUND_TO_INTEGER_F32 = 12582912.0
# the float32 reduction is within 1 ulp up to here; beyond, the float64 functions are rounded
_FLOAT32_LIMIT = 1024.0


@numba.njit(cache=True)
def sincos_as(x, real):
    """``(sin(x), cos(x))`` of type ``real`` (``numpy.float64`` or ``numpy.float32``), computed
    in that precision; the same bits on every backend.

    Parameters
    ----------
    x : float
        Any real scalar.
    real : numpy scalar type
        The env's precision: float64 runs `sincos`; float32 runs float32 arithmetic for
        ``|x| <= 1024`` and `sincos` rounded beyond.
    """
    if real(16777217.0) == real(16777216.0) and abs(real(x)) <= real(_FLOAT32_LIMIT):  # float32, in range
        x = real(x)
        n = (x * real(_INVERSE_HALF_PI) + real(_ROUND_TO_INTEGER_F32)) - real(_ROUND_TO_INTEGER_F32)
        r = ((x - n * real(_HALF_PI_1_F32)) - n * real(_HALF_PI_2_F32)) - n * real(_HALF_PI_3_F32)
        z = r * r
        s = ((real(-1.9515295891e-4) * z + real(8.3321608736e-3)) * z - real(1.6666654611e-1)) * z * r + r
        c = (((real(2.443315711809948e-5) * z - real(1.388731625493765e-3)) * z + real(4.166664568298827e-2)) * z * z
             - real(0.5) * z + real(1.0))
        quadrant = n % real(4.0)
        if quadrant == real(0.0):
            return s, c
        if quadrant == real(1.0):
            return c, -s
        if quadrant == real(2.0):
            return -s, -c
        return -c, s
    s64, c64 = sincos(x)
    return real(s64), real(c64)


@numba.njit(cache=True)
def sin_as(x, real):
    """``sin(x)`` of type ``real``, computed in that precision (see `sincos_as`)."""
    return sincos_as(x, real)[0]


@numba.njit(cache=True)
def cos_as(x, real):
    """``cos(x)`` of type ``real``, computed in that precision (see `sincos_as`)."""
    return sincos_as(x, real)[1]
