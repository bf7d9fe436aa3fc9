"""The verdict states of ``gpusbom check`` and how they combine.

``runs``: native code (SASS, a gfx code object) for the GPU in every binary checked;
``runs-with-jit``: some binary needs the driver to compile PTX (or SPIR-V) at first launch;
``unchecked``: the image's GPU code cannot be judged (no device code found, the GPU's
architecture is unknown, a format gpusbom does not read); ``not-applicable``: the image holds
no runtime and no device code for this GPU's vendor (a ROCm-only image on an NVIDIA node);
``will-fail``: a binary the workload would load, or the runtime, fails on this GPU.

Only ``runs`` and ``runs-with-jit`` are green, in every output (:data:`GREEN`).
"""

from __future__ import annotations

from collections.abc import Iterable

RUNS = "runs"
JIT = "runs-with-jit"
UNCHECKED = "unchecked"
NA = "not-applicable"
FAIL = "will-fail"

#: every state, best first (the order of ``worst``)
STATES = (RUNS, JIT, UNCHECKED, NA, FAIL)
GREEN = frozenset({RUNS, JIT})
_RANK = {s: i for i, s in enumerate(STATES)}


def worst(verdicts: Iterable[str]) -> str:
    """The worst of ``verdicts`` (``runs`` when there are none)."""
    out = RUNS
    for v in verdicts:
        if _RANK[v] > _RANK[out]:
            out = v
    return out


def is_green(verdict: str) -> bool:
    """``runs`` and ``runs-with-jit`` only: what a person may read as "will work"."""
    return verdict in GREEN
