from __future__ import annotations

import os

import pytest
from probe_util import HERE


@pytest.fixture
def test_kernels(monkeypatch: pytest.MonkeyPatch):
    """Select a TEST-ONLY kernel set (module in this directory) for parent and children."""

    def use(module: str) -> None:
        monkeypatch.syspath_prepend(HERE)
        old = os.environ.get("PYTHONPATH")
        monkeypatch.setenv("PYTHONPATH", HERE + (os.pathsep + old if old else ""))
        monkeypatch.setenv("GPUSBOM_PROBE_TEST_KERNELS", module)

    return use
