"""``NVIDIA_REQUIRE_*`` evaluated the way the NVIDIA Container Toolkit does at container start.

Semantics (read from NVIDIA/libnvidia-container ``src/cli/dsl.c`` and ``configure.c``, and
nvidia-container-toolkit ``internal/config/image/cuda_image.go``; not copied):

* every image env var named ``NVIDIA_REQUIRE_*`` except ``NVIDIA_REQUIRE_JETPACK`` is one
  requirement; all must hold. A "legacy" image (``CUDA_VERSION`` set, no
  ``NVIDIA_REQUIRE_CUDA``) gets ``cuda>=<major.minor of CUDA_VERSION>``.
  ``NVIDIA_DISABLE_REQUIRE`` set to a true boolean skips them all;
* in one requirement, space-separated groups are alternatives (OR) and comma-separated terms
  inside a group must all hold (AND);
* a term is ``NAME OP VALUE`` with OP one of ``= != < <= > >=``; names: ``cuda`` (the CUDA
  version the host driver supports, e.g. 13.0), ``driver`` (the kernel driver version,
  e.g. 580.159.04), ``arch`` (compute capability, 9.0), ``brand`` (NVML brand: tesla,
  nvidia, geforce, ...; only ``=``/``!=``, case-insensitive). Versions compare numerically
  part by part; trailing ``.0`` parts are ignored;
* a fact that is not known (no device visible, brand NULL) makes its term true;
* an unknown name or malformed term makes the whole requirement an error: the container does
  not start ("invalid expression");
* evaluated once per visible GPU (and globally when none is visible).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRUE = frozenset({"1", "t", "true", "TRUE", "True", "T"})
_FALSE = frozenset({"0", "f", "false", "FALSE", "False", "F"})
_TERM = re.compile(r"^(?P<name>[^<>=!]+)(?P<op>[<>=!]+)(?P<val>.*)$")
_OPS = ("=", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Facts:
    """What nvidia-container-cli knows when it checks: None = not known (term is true)."""

    cuda: str | None = None
    driver: str | None = None
    arch: str | None = None
    brand: str | None = None


@dataclass(frozen=True)
class Outcome:
    ok: bool
    requirement: str
    failed_on: str | None = None  # the first group, as the error message names it
    error: str | None = None  # "invalid expression"

    def message(self) -> str:
        if self.error:
            return f"requirement error: {self.error}: {self.requirement}"
        if self.ok:
            return f"satisfied: {self.requirement}"
        head = self.failed_on or self.requirement
        if head.startswith("cuda>="):
            return (f"unsatisfied condition: {head}, please update your driver to a newer "
                    "version, or use an earlier cuda container")
        return f"unsatisfied condition: {head}"


def _parse_num(v: str) -> list[int] | None:
    if not v or any(ch not in "0123456789." for ch in v):
        return None
    parts = [p for p in v.split(".") if p != ""]
    if not parts:
        return None
    return [int(p) for p in parts]


def compare_version(a: str, op: str, b: str) -> bool | None:
    """Numeric dotted comparison; None when either side is not a dotted number."""
    x, y = _parse_num(a), _parse_num(b)
    if x is None or y is None:
        return None
    while len(x) > 1 and x[-1] == 0:
        x.pop()
    while len(y) > 1 and y[-1] == 0:
        y.pop()
    n = max(len(x), len(y))
    xx, yy = x + [-1] * (n - len(x)), y + [-1] * (n - len(y))  # missing part sorts lower
    return {
        "=": xx == yy, "!=": xx != yy, "<": xx < yy, "<=": xx <= yy, ">": xx > yy, ">=": xx >= yy,
    }[op]


def _term(term: str, facts: Facts) -> bool | None:
    m = _TERM.match(term)
    if not m or m.group("op") not in _OPS or not m.group("val"):
        return None
    name, op, val = m.group("name").lower(), m.group("op"), m.group("val")
    if name == "brand":
        if op not in ("=", "!="):
            return None
        if facts.brand is None:
            return True
        eq = facts.brand.lower() == val.lower()
        return eq if op == "=" else not eq
    if name not in ("cuda", "driver", "arch"):
        return None
    have = getattr(facts, name)
    if have is None:
        return True
    return compare_version(have, op, val)


def evaluate(requirement: str, facts: Facts) -> Outcome:
    ok = True
    for group in requirement.split(" "):
        if not group:
            continue
        ok = True
        for term in group.split(","):
            if not term:
                continue
            r = _term(term, facts)
            if r is None:
                return Outcome(False, requirement, error="invalid expression")
            if not r:
                ok = False
                break
        if ok:
            return Outcome(True, requirement)
    first = next((g for g in requirement.split(" ") if g), requirement)
    return Outcome(ok, requirement, failed_on=None if ok else first)


def requirements(env: dict[str, str]) -> tuple[list[str], str | None]:
    """(requirements, note) from an image env, as the container toolkit collects them."""
    disable = env.get("NVIDIA_DISABLE_REQUIRE")
    if disable is not None and disable.strip() in _TRUE:
        return [], "NVIDIA_DISABLE_REQUIRE is set: the container toolkit checks no requirement"
    out = [v for k, v in sorted(env.items())
           if k.startswith("NVIDIA_REQUIRE_") and not k.startswith("NVIDIA_REQUIRE_JETPACK")]
    if env.get("CUDA_VERSION") and not env.get("NVIDIA_REQUIRE_CUDA"):
        m = re.match(r"(\d+)\.(\d+)", env["CUDA_VERSION"])
        if m:
            out.append(f"cuda>={m.group(1)}.{m.group(2)}")
    note = None
    if disable is not None and disable.strip() not in _FALSE | _TRUE:
        note = f"NVIDIA_DISABLE_REQUIRE={disable!r} is not a boolean: requirements are checked"
    return out, note
