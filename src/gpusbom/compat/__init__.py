"""``gpusbom check``: predict whether an image runs on given GPUs and drivers.

Public API::

    evaluate(image: ScanResult, targets: list[str], *, driver=None) -> list[Verdict]
    check_against_host(image: ScanResult, host: ScanResult) -> list[Verdict]

``Verdict``: ``.target``, ``.verdict`` (``runs`` | ``runs-with-jit`` | ``unchecked`` |
``not-applicable`` | ``will-fail``; only the first two are green: :func:`is_green`),
``.reasons`` (the chain), ``.evidence`` (paths), ``.libraries`` (per-component
``LibraryVerdict``), ``.summary()``, ``.to_dict()``. Rules: :mod:`.arch` (SASS/PTX/gfx),
:mod:`.require` (``NVIDIA_REQUIRE_*``), :mod:`.tables` (data files with their sources),
:mod:`.binaries` (each file's device code), :mod:`.evaluate` (the chain),
:mod:`.states`. Output renderers: :mod:`.report`.
"""

from __future__ import annotations

from .evaluate import check_against_host, evaluate, evaluate_platform
from .states import FAIL, GREEN, JIT, NA, RUNS, STATES, UNCHECKED, is_green, worst
from .targets import Gpu, GpuTarget, platform_from_string, platforms_from_host
from .verdicts import LibraryVerdict, Verdict

__all__ = [
    "FAIL",
    "GREEN",
    "JIT",
    "NA",
    "RUNS",
    "STATES",
    "UNCHECKED",
    "Gpu",
    "LibraryVerdict",
    "GpuTarget",
    "Verdict",
    "check_against_host",
    "evaluate",
    "evaluate_platform",
    "is_green",
    "platform_from_string",
    "platforms_from_host",
    "worst",
]
