"""The records of ``gpusbom check``: a :class:`Verdict` per image and target, made of a
:class:`LibraryVerdict` per binary (one file's device code) and per runtime."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .states import STATES


@dataclass
class LibraryVerdict:
    """The verdict of one binary (one file's device code), or of a runtime (cudart, a
    framework built for a CUDA release), on one target.

    ``file``: the binary's path (device-code verdicts); ``targets``: what that file holds
    (``cuda:sass`` -> ``sm_80,sm_90``...); ``component``: the bom-ref of the package owning
    it."""

    name: str
    kind: str  # cuda-code | hip-code | cuda-runtime | rocm-runtime
    verdict: str
    reason: str
    evidence: list[str] = field(default_factory=list)
    component: str = ""  # bom-ref
    file: str = ""
    targets: dict[str, str] = field(default_factory=dict)


@dataclass
class Verdict:
    """One image on one target: the worst of its binaries and runtime checks."""

    image: str
    target: str
    verdict: str
    reasons: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    libraries: list[LibraryVerdict] = field(default_factory=list)
    gpu: dict[str, Any] = field(default_factory=dict)
    driver: str | None = None
    host: str | None = None

    def summary(self) -> dict[str, int]:
        out = dict.fromkeys(STATES, 0)
        for lib in self.libraries:
            out[lib.verdict] += 1
        return out

    @property
    def failing(self) -> list[LibraryVerdict]:
        """The binaries and runtimes behind a verdict that is not green, worst first."""
        from .states import _RANK, GREEN

        bad = [lib for lib in self.libraries if lib.verdict not in GREEN]
        return sorted(bad, key=lambda lib: -_RANK[lib.verdict])

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = self.summary()
        return d
