"""``gpusbom check``: predict whether an image runs on given GPUs and drivers.

Public API::

    evaluate(image: ScanResult, targets: list[str], *, driver=None) -> list[Verdict]
    check_against_host(image: ScanResult, host: ScanResult) -> list[Verdict]

``Verdict``: ``.target``, ``.verdict`` (``runs`` | ``runs-with-jit`` | ``will-fail``),
``.reasons`` (the chain), ``.evidence`` (paths), ``.libraries`` (per-component
``LibraryVerdict``), ``.summary()``, ``.to_dict()``. Rules: :mod:`.arch` (SASS/PTX/gfx),
:mod:`.require` (``NVIDIA_REQUIRE_*``), :mod:`.tables` (data files with their sources),
:mod:`.evaluate` (the chain). Output renderers: :mod:`.report`.
"""

from __future__ import annotations

from .evaluate import (
    FAIL,
    JIT,
    RUNS,
    LibraryVerdict,
    Verdict,
    check_against_host,
    evaluate,
    evaluate_platform,
    worst,
)
from .targets import Gpu, GpuTarget, platform_from_string, platforms_from_host

__all__ = [
    "FAIL",
    "JIT",
    "RUNS",
    "Gpu",
    "LibraryVerdict",
    "GpuTarget",
    "Verdict",
    "check_against_host",
    "evaluate",
    "evaluate_platform",
    "platform_from_string",
    "platforms_from_host",
    "worst",
]
