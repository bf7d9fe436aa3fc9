"""Helpers for the probe tests (imported by name: the test directories are not packages)."""

from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def pocl_available() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:  # noqa: BLE001
        return False


needs_opencl = pytest.mark.skipif(not pocl_available(), reason="no OpenCL platform (install pocl-opencl-icd)")
