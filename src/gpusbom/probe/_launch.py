"""Host-side buffers and argument packing shared by the ctypes backends (CUDA, HIP).

Both driver APIs take the same kernel signature ``(A, B, C, n)`` as an array of
pointers to the argument values, and copy the same three N x N float buffers.
"""

from __future__ import annotations

import ctypes
from ctypes import byref, c_float, c_uint, c_void_p
from typing import Any

from . import kernel as K

NBYTES = K.N * K.N * 4
_Floats = c_float * (K.N * K.N)


def host_inputs() -> tuple[Any, Any, Any]:
    """A, B and a C that starts as NaN everywhere (an element the kernel never writes
    cannot pass). Keep the returned objects alive while the copies run."""
    a, b = K.inputs()
    nan = _Floats(*([float("nan")] * (K.N * K.N)))
    return _Floats.from_buffer(a), _Floats.from_buffer(b), nan


def result_buffer() -> Any:
    return _Floats()


def kernel_params(ptrs: list[Any], ptr_type: Any, null_params: int = 0) -> tuple[Any, list[Any]]:
    """``void* params[4 + null_params]`` for (A, B, C, n, NULL...) and the values it points
    at (keep them alive until the launch returns)."""
    values = [ptr_type(p.value) for p in ptrs] + [c_uint(K.N)] + [ptr_type(0) for _ in range(null_params)]
    params = (c_void_p * len(values))(*[ctypes.cast(byref(x), c_void_p) for x in values])
    return params, values
