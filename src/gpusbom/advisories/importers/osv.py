"""OSV JSON (https://ossf.github.io/osv-schema/) -> gpusbom advisory records.

Used for PyPI (GHSA / PYSEC entries for torch, triton, vllm, transformers, onnxruntime...)
and for distribution packages (Debian ``DSA``/``DLA``/``DEBIAN-CVE``, Ubuntu ``USN`` /
``UBUNTU-CVE`` entries naming *source* packages such as ``nvidia-graphics-drivers``).

Mapping:

- ``affected[].package`` -> a package target: ``pkg:pypi/<name>``,
  ``pkg:deb/debian/<source>`` / ``pkg:deb/ubuntu/<source>`` with ``distro``
  (``Debian:12`` -> ``debian-12``, ``Ubuntu:22.04:LTS`` / ``Ubuntu:Pro:22.04:LTS`` ->
  ``ubuntu-22.04``); scheme by ecosystem (PyPI -> ``pep440``, Debian/Ubuntu -> ``deb``,
  Go/npm/crates.io -> ``semver``);
- ``ranges`` of type ``ECOSYSTEM`` / ``SEMVER``: the ``events`` in order become
  ``introduced`` / ``fixed`` / ``last_affected`` intervals; ``GIT`` ranges have no
  versions, so the enumerated ``versions`` list is used instead when given;
- ``severity`` CVSS v3.x / v4.0 vectors -> scores computed with the ``cvss`` library;
- the vulnerability is named by its CVE when the entry has exactly one, the OSV id
  otherwise; every other id is an alias.

Nothing is dropped silently: a version that does not parse in its scheme, an ecosystem
with no scheme, a range with no usable events all go to ``OsvImport.unparsed``; an
affected package left with nothing machine-readable gets ``no_range`` (the matcher then
reports ``review``). Withdrawn entries give no record (``OsvImport.skipped``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..versions import InvalidVersion, parse
from . import shape_checked

__all__ = [
    "GPU_DEB_PREFIXES",
    "GPU_PYPI",
    "OsvImport",
    "ecosystem_info",
    "gpu_relevant",
    "import_osv",
]

#: PyPI projects of GPU stacks (names normalised as PEP 503; ``nvidia-*`` by prefix)
GPU_PYPI = frozenset({
    "torch", "torchvision", "torchaudio", "triton", "tritonclient", "vllm", "transformers",
    "onnxruntime", "onnxruntime-gpu", "tensorflow", "tensorflow-gpu", "tensorflow-cpu",
    "jax", "jaxlib", "cupy", "pycuda", "numba", "tensorrt", "tensorrt-llm", "accelerate",
    "deepspeed", "xformers", "flash-attn", "diffusers", "paddlepaddle", "paddlepaddle-gpu",
    "mxnet", "keras", "bitsandbytes", "safetensors", "sglang", "llama-cpp-python",
    "nvidia-container-toolkit", "apex", "megatron-core", "nemo-toolkit", "dali",
})
GPU_PYPI_PREFIXES = ("nvidia-", "cupy-", "jax-cuda", "jax-rocm", "onnxruntime-")
#: Debian / Ubuntu source packages of GPU stacks (by prefix)
GPU_DEB_PREFIXES = (
    "nvidia-", "libnvidia-", "cuda", "rocm", "rocr-", "hip", "intel-compute-runtime",
    "intel-graphics-compiler", "level-zero", "intel-media-driver", "mesa", "pocl", "ocl-icd",
    "vulkan-loader", "libdrm", "libvdpau", "libva",
)


def _pep503(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def gpu_relevant(ecosystem: str, name: str) -> bool:
    """Is this OSV package part of a GPU stack (what ``gpusbom advisories update`` keeps)?"""
    base = ecosystem.split(":", 1)[0]
    if base == "PyPI":
        n = _pep503(name)
        return n in GPU_PYPI or n.startswith(GPU_PYPI_PREFIXES)
    if base in ("Debian", "Ubuntu"):
        return name.lower().startswith(GPU_DEB_PREFIXES)
    if base == "Go":
        return name.lower().startswith("github.com/nvidia/")
    return False


@dataclass(frozen=True)
class EcosystemInfo:
    purl_type: str
    namespace: str | None
    scheme: str
    distro: str | None


_UBUNTU_RX = re.compile(r"^Ubuntu(?::Pro)?(?::FIPS[^:]*)?:(\d+\.\d+)(?::LTS)?$")
_DEBIAN_RX = re.compile(r"^Debian:(\d+)$")


def ecosystem_info(ecosystem: str) -> EcosystemInfo | None:
    """How a package of this OSV ecosystem is named and versioned; None when unsupported."""
    if ecosystem == "PyPI":
        return EcosystemInfo("pypi", None, "pep440", None)
    m = _DEBIAN_RX.match(ecosystem)
    if m:
        return EcosystemInfo("deb", "debian", "deb", f"debian-{m.group(1)}")
    if ecosystem == "Debian":
        return EcosystemInfo("deb", "debian", "deb", None)
    m = _UBUNTU_RX.match(ecosystem)
    if m:
        return EcosystemInfo("deb", "ubuntu", "deb", f"ubuntu-{m.group(1)}")
    if ecosystem == "Go":
        return EcosystemInfo("golang", None, "semver", None)
    if ecosystem == "npm":
        return EcosystemInfo("npm", None, "semver", None)
    if ecosystem == "crates.io":
        return EcosystemInfo("cargo", None, "semver", None)
    return None


@dataclass
class OsvImport:
    record: dict[str, Any] | None
    unparsed: list[str] = field(default_factory=list)  # what could not be turned into ranges
    skipped: str | None = None  # why no record was made


_VENDORS = (("GHSA-", "GitHub"), ("PYSEC-", "PyPA"), ("DSA-", "Debian"), ("DLA-", "Debian"),
            ("DTSA-", "Debian"), ("DEBIAN-", "Debian"), ("USN-", "Ubuntu"),
            ("UBUNTU-", "Ubuntu"), ("GO-", "Go"), ("CVE-", "CVE"))


def _vendor(osv_id: str) -> str:
    for prefix, name in _VENDORS:
        if osv_id.upper().startswith(prefix):
            return name
    return "OSV"


def cvss_score(vector: str) -> tuple[str, float] | None:
    """(score type, base score) of a CVSS v3.x / v4.0 vector; None for others or bad ones."""
    try:
        if vector.startswith("CVSS:4.0/"):
            from cvss import CVSS4  # type: ignore[import-untyped]

            return "CVSS_V4_0", float(CVSS4(vector).base_score)
        if vector.startswith(("CVSS:3.1/", "CVSS:3.0/")):
            from cvss import CVSS3

            t = "CVSS_V3_1" if vector.startswith("CVSS:3.1/") else "CVSS_V3_0"
            return t, float(CVSS3(vector).base_score)
    except Exception:  # noqa: BLE001 - the cvss library raises its own error classes
        return None
    return None


def _severity(items: Any, unparsed: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in items or []:
        if not isinstance(s, dict) or s.get("type") not in ("CVSS_V3", "CVSS_V4"):
            continue
        vector = str(s.get("score", ""))
        got = cvss_score(vector)
        if got is None:
            unparsed.append(f"severity vector not understood: {vector!r}")
            continue
        entry = {"type": got[0], "vector": vector, "score": got[1]}
        if entry not in out:
            out.append(entry)
    return out


def _ok(scheme: str, v: str) -> bool:
    try:
        parse(scheme, v)
    except InvalidVersion:
        return False
    return True


def _ranges(events: list[Any], scheme: str, where: str, unparsed: list[str]
            ) -> tuple[list[dict[str, str]], list[str]] | None:
    """OSV events (in order) -> (ranges, fixed versions); None when a version is unusable."""
    ranges: list[dict[str, str]] = []
    fixed: list[str] = []
    cur: str | None = None
    for ev in events:
        if not isinstance(ev, dict) or len(ev) != 1:
            unparsed.append(f"{where}: event not understood: {ev!r}")
            return None
        (kind, value), = ev.items()
        value = str(value)
        if kind == "limit":
            continue  # only meaningful for GIT ranges
        if kind not in ("introduced", "fixed", "last_affected"):
            unparsed.append(f"{where}: unknown event {kind!r}")
            return None
        if not (value == "0" and kind == "introduced") and not _ok(scheme, value):
            unparsed.append(f"{where}: {kind} {value!r} is not a {scheme} version")
            return None
        if kind == "introduced":
            if cur is not None:
                ranges.append({"introduced": cur})
            cur = value
            continue
        r = {"introduced": cur} if cur is not None else {}
        r[kind] = value
        if kind == "fixed":
            fixed.append(value)
        ranges.append(r)
        cur = None
    if cur is not None:
        ranges.append({"introduced": cur})  # affected from there on, no fix
    return ranges, fixed


def _affected(a: dict[str, Any], keep: Callable[[str, str], bool] | None,
              unparsed: list[str]) -> dict[str, Any] | None:
    pkg = a.get("package") or {}
    eco, name = str(pkg.get("ecosystem", "")), str(pkg.get("name", ""))
    if not eco or not name:
        unparsed.append(f"affected entry without package: {a!r:.120}")
        return None
    if keep is not None and not keep(eco, name):
        return None
    info = ecosystem_info(eco)
    where = f"{eco}/{name}"
    if info is None:
        unparsed.append(f"{where}: ecosystem {eco!r} has no version scheme in gpusbom")
        return None
    pname = _pep503(name) if info.purl_type == "pypi" else name
    target = "/".join(x for x in ("pkg:" + info.purl_type, info.namespace, pname) if x)
    out: dict[str, Any] = {"target": target, "vendor_product": name, "scheme": info.scheme}
    if info.distro:
        out["distro"] = info.distro
    ranges: list[dict[str, str]] = []
    fixed: list[str] = []
    git_only = False
    bad = False
    for r in a.get("ranges") or []:
        rtype = r.get("type") if isinstance(r, dict) else None
        if rtype == "GIT":
            git_only = True
            continue
        if rtype not in ("ECOSYSTEM", "SEMVER"):
            unparsed.append(f"{where}: range type {rtype!r} not understood")
            bad = True
            continue
        got = _ranges(r.get("events") or [], info.scheme, where, unparsed)
        if got is None:
            bad = True
            continue
        for x in got[0]:
            if x not in ranges:
                ranges.append(x)
        fixed.extend(f for f in got[1] if f not in fixed)
    versions: list[str] = []
    if not ranges:
        for v in a.get("versions") or []:
            if _ok(info.scheme, str(v)):
                versions.append(str(v))
            else:
                unparsed.append(f"{where}: version {v!r} is not a {info.scheme} version")
                bad = True
    if ranges:
        out["ranges"] = ranges
    elif versions:
        out["versions"] = versions
    if fixed:
        out["fixed"] = fixed
    if not ranges and not versions:
        why = ("only git commit ranges" if git_only and not bad
               else "no usable version range" if not bad
               else "version range not understood (see the OSV entry)")
        out["no_range"] = why
        if git_only and not bad:
            unparsed.append(f"{where}: only GIT ranges and no version list")
    elif bad:
        out["note"] = "some ranges of the OSV entry were not understood"
    return out


@shape_checked("OSV")
def import_osv(doc: dict[str, Any], *, keep: Callable[[str, str], bool] | None = None
               ) -> OsvImport:
    """One OSV entry -> a gpusbom record (or None with ``skipped``).

    ``keep(ecosystem, name)``: which affected packages to keep (default: all)."""
    unparsed: list[str] = []
    oid = str(doc.get("id", "")).strip()
    if not oid:
        return OsvImport(None, ["entry without id"], "no id")
    if doc.get("withdrawn"):
        return OsvImport(None, [], f"{oid}: withdrawn {doc['withdrawn']}")
    affected = []
    for a in doc.get("affected") or []:
        if isinstance(a, dict):
            got = _affected(a, keep, unparsed)
            if got is not None:
                got_sev = _severity(a.get("severity"), unparsed)
                affected.append((got, got_sev))
    if not affected:
        return OsvImport(None, unparsed, f"{oid}: no affected package kept")
    aliases = sorted({str(x) for x in doc.get("aliases") or [] if str(x) != oid})
    cves = sorted({x for x in [oid, *aliases] if x.upper().startswith("CVE-")})
    vid = cves[0] if len(cves) == 1 else oid
    severity = _severity(doc.get("severity"), unparsed)
    for _, sev in affected:
        severity.extend(s for s in sev if s not in severity)
    summary = str(doc.get("summary") or "").strip()
    if not summary:
        details = str(doc.get("details") or "").strip()
        summary = details.splitlines()[0][:200] if details else oid
    published = str(doc.get("published") or doc.get("modified") or "")[:10]
    sources = [f"https://osv.dev/vulnerability/{oid}"]
    for ref in doc.get("references") or []:
        url = ref.get("url") if isinstance(ref, dict) else None
        if (isinstance(url, str) and url.startswith("https://") and ref.get("type") == "ADVISORY"
                and url not in sources and len(sources) < 6):
            sources.append(url)
    record = {
        "id": oid,
        "vendor": _vendor(oid),
        "aliases": sorted({*aliases, vid} - {oid}) if vid != oid else aliases,
        "title": summary,
        "published": published,
        "modified": str(doc.get("modified") or "")[:10] or None,
        "sources": sources,
        "verification": {
            "status": "verified" if not unparsed else "partial",
            "notes": f"imported from OSV {doc.get('schema_version', '')}".rstrip()
            + ("; not understood: " + "; ".join(unparsed) if unparsed else ""),
        },
        "vulnerabilities": [{
            "id": vid,
            "aliases": [x for x in [oid, *aliases] if x != vid],
            "severity": severity,
            "affected": [a for a, _ in affected],
        }],
    }
    return OsvImport(record, unparsed)
