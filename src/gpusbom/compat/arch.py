"""Architecture rules: which CUDA code object runs on which compute capability, and which
AMD code object runs on which gfx ISA.

CUDA (CUDA Programming Guide, "Compute Capabilities" and "Binary/PTX compatibility";
Blackwell Compatibility Guide; NVIDIA blog "Family-Specific Architecture Features", CUDA 12.9):

* SASS ``sm_XY`` runs on compute capability X.Z with the same major X and Z >= Y
  (``sm_80`` on 8.0 and 8.6, never on 9.0);
* ``sm_XYa`` (architecture-specific) runs only on exactly X.Y;
* ``sm_XYf`` (family-specific) runs within its family: same major, minor >= Y
  (``sm_100f`` on 10.0 and 10.3; ``sm_103f`` on 10.3 only; ``sm_120f`` on 12.0 and 12.1);
* PTX ``compute_XY`` is JIT-compiled for any capability >= X.Y (major or minor);
  ``compute_XYa`` only for exactly X.Y, ``compute_XYf`` only within the family.

AMD (LLVM AMDGPU "Target ID" and "Target Features"): a code object for ``gfxNNN`` runs only
on ``gfxNNN``; ``:xnack+``/``:xnack-`` and ``:sramecc+``/``:sramecc-`` must equal the
device's mode, and a feature the code object leaves unspecified ("any") runs in both modes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CUDA_RX = re.compile(r"^(?P<kind>sm|compute|lto)_(?P<num>\d{2,3})(?P<var>[af]?)$")
_CC_RX = re.compile(r"^(?P<major>\d{1,2})\.(?P<minor>\d)$")
_GFX_RX = re.compile(r"^(?P<proc>gfx[0-9a-f]{3,5})(?P<feat>(?::[a-z]+[+-])*)$", re.IGNORECASE)


@dataclass(frozen=True, order=True)
class ComputeCapability:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def sm(self) -> str:
        return f"sm_{self.major}{self.minor}"

    @classmethod
    def parse(cls, text: str) -> ComputeCapability | None:
        """``9.0``, ``sm_90``, ``90`` -> 9.0; None when it is none of these."""
        t = text.strip().lower()
        m = _CC_RX.match(t)
        if m:
            return cls(int(m.group("major")), int(m.group("minor")))
        t = t.removeprefix("sm_").removeprefix("compute_")
        if t.isdigit() and len(t) in (2, 3):
            n = int(t)
            return cls(n // 10, n % 10)
        return None


@dataclass(frozen=True)
class CudaCode:
    """One CUDA code target of a binary: ``sm_90a`` (SASS) or ``compute_80`` (PTX)."""

    kind: str  # sass | ptx | lto
    cc: ComputeCapability
    variant: str  # "" | "a" | "f"

    @property
    def name(self) -> str:
        prefix = {"sass": "sm", "ptx": "compute", "lto": "lto"}[self.kind]
        return f"{prefix}_{self.cc.major}{self.cc.minor}{self.variant}"

    @classmethod
    def parse(cls, text: str) -> CudaCode | None:
        m = _CUDA_RX.match(text.strip().lower())
        if not m:
            return None
        n = int(m.group("num"))
        kind = {"sm": "sass", "compute": "ptx", "lto": "lto"}[m.group("kind")]
        return cls(kind, ComputeCapability(n // 10, n % 10), m.group("var"))


def sass_runs_on(code: CudaCode, cc: ComputeCapability) -> bool:
    """Binary compatibility of a cubin with a device (see the module docstring)."""
    if code.variant == "a":
        return code.cc == cc
    return code.cc.major == cc.major and code.cc.minor <= cc.minor


def ptx_jits_for(code: CudaCode, cc: ComputeCapability) -> bool:
    """Whether the driver may JIT-compile this PTX for ``cc`` (ISA version aside)."""
    if code.variant == "a":
        return code.cc == cc
    if code.variant == "f":
        return code.cc.major == cc.major and code.cc.minor <= cc.minor
    return code.cc <= cc


# ------------------------------------------------------------------------------ AMD gfx


@dataclass(frozen=True)
class GfxTarget:
    """``gfx90a:sramecc+:xnack-`` -> processor ``gfx90a``, features {sramecc: +, xnack: -}."""

    processor: str
    features: tuple[tuple[str, str], ...] = ()  # sorted (name, "+"|"-")

    def __str__(self) -> str:
        return self.processor + "".join(f":{k}{v}" for k, v in self.features)

    def feature(self, name: str) -> str | None:
        for k, v in self.features:
            if k == name:
                return v
        return None

    @classmethod
    def parse(cls, text: str) -> GfxTarget | None:
        t = text.strip()
        # offload bundle ids: hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-
        if "--" in t:
            t = t.rsplit("--", 1)[1]
        m = _GFX_RX.match(t)
        if not m:
            return None
        feats = []
        for f in m.group("feat").split(":"):
            if f:
                feats.append((f[:-1].lower(), f[-1]))
        return cls(m.group("proc").lower(), tuple(sorted(feats)))


def gfx_runs_on(code: GfxTarget, device: GfxTarget) -> tuple[bool, str]:
    """(runs, why) for a code object on a device. A device feature that is not known
    (absent from ``device``) is assumed to match, and the reason says so."""
    if code.processor != device.processor:
        return False, f"{code} is for {code.processor}, the GPU is {device.processor}"
    unknown = []
    for name, want in code.features:
        have = device.feature(name)
        if have is None:
            unknown.append(f"{name}{want}")
        elif have != want:
            return False, f"{code} needs {name}{want}, the GPU runs with {name}{have}"
    if unknown:
        return True, (f"{code} matches {device.processor} if the GPU runs with "
                      f"{', '.join(unknown)} (mode not known)")
    return True, f"{code} matches {device}"


#: LLVM generic processors (LLVM "AMDGPU Backend User Guide", "Generic Processors" table,
#: https://llvm.org/docs/AMDGPUUsage.html#amdgpu-generic-processor-table): a code object
#: built for one runs on each listed processor.
GENERIC_GFX: dict[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset(
        {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}
    ),
    "gfx11-generic": frozenset(
        {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}
    ),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}
#: a SPIR-V code object that ROCm's comgr compiles for the GPU at load time (ROCm 6.4+)
SPIRV_GFX = "amdgcnspirv"


def parse_code_gfx(text: str) -> tuple[str, GfxTarget | None]:
    """Classify a ``hip:gfx`` value: ("spirv", None), ("generic", target) or ("gfx", target)."""
    t = text.strip().lower()
    if "--" in t:
        t = t.rsplit("--", 1)[1]
    if t.split(":", 1)[0] == SPIRV_GFX:
        return "spirv", None
    head, _, rest = t.partition(":")
    if head in GENERIC_GFX:
        feats = tuple(sorted((f[:-1], f[-1]) for f in rest.split(":") if f and f[-1] in "+-"))
        return "generic", GfxTarget(head, feats)
    return "gfx", GfxTarget.parse(t)


def code_gfx_runs_on(text: str, device: GfxTarget) -> tuple[str, str]:
    """("runs" | "jit" | "no", why) for one ``hip:gfx`` value on a device."""
    kind, code = parse_code_gfx(text)
    if kind == "spirv":
        return "jit", f"{text} is SPIR-V: compiled for {device.processor} when loaded"
    if code is None:
        return "no", f"{text}: not a gfx target"
    if kind == "generic":
        if device.processor not in GENERIC_GFX[code.processor]:
            return "no", f"{code.processor} does not cover {device.processor}"
        ok, why = gfx_runs_on(GfxTarget(device.processor, code.features), device)
        return ("runs" if ok else "no"), f"{code.processor} covers {device.processor}; " + why
    ok, why = gfx_runs_on(code, device)
    return ("runs" if ok else "no"), why
