"""Smoke-test probe: a real kernel on every GPU through every runtime found.

- ``run_probes(backends=None, timeout=20.0) -> list[ProbeResult]`` (runner.py): every
  (backend, device) in its own child process (``python -m gpusbom.probe.worker``).
- ``attach_probes(result, probes)`` (attach.py): the results onto the device components
  of a ScanResult (the host scan's, matched by PCI address / UUID, or new ones).
- ``probe_scan(probes)``: a stand-alone host ScanResult (``gpusbom probe``).
- ``probe_failures(probes)``: what a gate refuses (fail, error, timeout).

Backends (one module each, registering itself): cuda, hip, level_zero, opencl, sycl,
vulkan; the kernel and its CPU reference: kernel.py. Names are imported lazily, so the
child processes load only what they use.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ALL_BACKENDS", "DEFAULT_TIMEOUT", "PROBE_VERSION", "attach_probes", "probe_failures",
    "probe_scan", "run_probes",
]

_FROM = {
    "ALL_BACKENDS": "runner", "DEFAULT_TIMEOUT": "runner", "run_probes": "runner",
    "PROBE_VERSION": "attach", "attach_probes": "attach", "probe_failures": "attach",
    "probe_scan": "attach",
}


def __getattr__(name: str) -> Any:
    if name in _FROM:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)
    raise AttributeError(name)
