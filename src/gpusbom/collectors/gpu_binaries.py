"""gpu-binaries: what the GPU code inside each shared library and executable was built for.

Every shared library (``*.so``, ``*.so.*``), executable (files of ``bin``, ``sbin`` and
``libexec`` directories: ELF ``ET_EXEC`` or PIE) and raw GPU code file (``*.fatbin``,
``*.cubin``, ``*.hsaco``) is fed, as its layer streams, to :class:`gpusbom.binary.stream.GpuCodeScanner`
(nothing is kept: ``max_size=0``); files that start with neither an ELF nor a fatbin/bundle
magic are not scanned. For each file with device code, one observation:

* ``sha256`` on the evidence: the SHA-256 of the file's bytes, hashed as they streamed;
* ``name``: the file's stem (``libcublasLt``), ``version``: the soname's (``12.4.127``; the
  bare major ``.so.12`` is not a version), ``ecosystem`` generic, evidence method ``elf``;
* properties: ``cuda:sass`` (``sm_80,sm_90,sm_90a``), ``cuda:ptx`` (``compute_90``),
  ``cuda:ptx-isa`` (``8.4``), ``cuda:lto``, ``cuda:compressed`` (``lz4,zstd``),
  ``hip:targets`` (full target ids, host entries left out), ``hip:gfx``
  (``gfx90a:xnack-``), ``hip:compressed``; comma-separated, sorted (architectures
  numerically).

The same targets are the observation's one :class:`gpusbom.devicecode.DeviceCode` record
(``device_code``): the file's own, kept per file wherever the observation is merged.

No ``stack``/``product``: these are facts about a file, not a product. Fusion merges them
into the package owning the file (the nvjpeg wheel then carries ``cuda:sass``) or into the
stack collector's observation of the same file; the package's properties are then the union
over its files (a summary), its ``device_code`` lists each file with its own targets.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import settings
from ..devicecode import DeviceCode
from ..fsview.spec import PathSpec
from ..fsview.types import EntryKind
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from .base import CollectContext, Collector

if TYPE_CHECKING:
    from ..binary.stream import GpuCodeScanner
    from ..binary.sycl_stream import SyclScanner

# gpusbom.binary (elftools, zstandard: ~110 ms) is imported only when a file is analysed:
# host scans do not analyse binaries, and the import would cost them every run.

_SO_RX = re.compile(r"^(?P<stem>.+?)\.so(?:\.(?P<suffix>[0-9][0-9A-Za-z.]*))?$")
_CODE_EXT = (".fatbin", ".cubin", ".hsaco")


def _scanner() -> GpuCodeScanner:
    from ..binary.stream import GpuCodeScanner

    # GPUSBOM_NO_BINARY_HASH=1 turns the SHA-256 off (benchmarks/scan_gpu_binaries.py
    # measures what it costs with it)
    return GpuCodeScanner(sha256=not settings.get("no_binary_hash"))


#: executables (ELF ``ET_EXEC`` or PIE) get the same analysis as shared libraries; files of
#: these directories that are not ELF are dropped after their first bytes
EXEC_GLOBS = ("/**/bin/*", "/**/sbin/*", "/**/libexec/**")

#: the device-code scanner factory, shared by other collectors' path specs (the same
#: function object: the matcher runs one factory once per file)
stream_scanner = _scanner


def _sycl_scanner() -> SyclScanner:
    from ..binary.sycl_stream import SyclScanner

    return SyclScanner()


PATHS = tuple(
    PathSpec(p, max_size=0, stream=(_scanner, _sycl_scanner))
    for p in ("/**/*.so", "/**/*.so.*", "/**/*.fatbin", "/**/*.cubin", "/**/*.hsaco", *EXEC_GLOBS)
)


def name_version(path: str) -> tuple[str, str | None, bool]:
    """(name, version, is_library) for a file path: ``libcudart.so.12.4.127`` ->
    (``libcudart``, ``12.4.127``, True); ``k.fatbin`` -> (``k``, None, False)."""
    base = path.rsplit("/", 1)[-1]
    for ext in _CODE_EXT:
        if base.endswith(ext):
            return base[: -len(ext)] or base, None, False
    m = _SO_RX.match(base)
    if not m:
        return base, None, not _is_executable(path)
    suffix = m.group("suffix")
    return m.group("stem"), suffix if suffix and "." in suffix else None, True


def _is_executable(path: str) -> bool:
    return any(f"/{d}/" in path for d in ("bin", "sbin", "libexec"))


def properties(analysis: dict[str, Any]) -> dict[str, str]:
    props: dict[str, str] = {}
    cuda = analysis.get("cuda") or {}
    for key, prop in (
        ("sass", "cuda:sass"),
        ("ptx", "cuda:ptx"),
        ("ptx_isa", "cuda:ptx-isa"),
        ("lto", "cuda:lto"),
        ("compressed", "cuda:compressed"),
    ):
        if cuda.get(key):
            props[prop] = ",".join(cuda[key])
    hip = analysis.get("hip") or {}
    targets: list[str] = []
    if hip.get("targets"):
        # imported only for HIP targets: the binary package (with zstandard) is ~10 ms of a
        # scan whose GPU binaries were all analysed when their layers were first read
        from ..binary.hipbundle import parse_target_id

        targets = [t for t in hip["targets"] if not parse_target_id(t).is_host]
    if targets:
        props["hip:targets"] = ",".join(targets)
    if hip.get("gfx"):
        props["hip:gfx"] = ",".join(hip["gfx"])
    if hip.get("compressed"):
        props["hip:compressed"] = ",".join(hip["compressed"])
    if analysis.get("intel"):
        from ..compat.intel import intel_properties

        props.update(intel_properties(analysis))
    return props


def _format(path: str) -> str:
    for ext in _CODE_EXT:
        if path.endswith(ext):
            return ext[1:]
    return "elf"


def _detail(analysis: dict[str, Any]) -> str:
    parts = []
    cuda = analysis.get("cuda")
    if cuda and cuda.get("entries"):
        parts.append(
            f"{cuda['entries']} fatbin entries in {cuda['containers']} containers: "
            f"{len(cuda['sass'])} SASS, {len(cuda['ptx'])} PTX, {len(cuda['lto'])} LTO targets"
        )
    hip = analysis.get("hip")
    if hip and hip.get("targets"):
        parts.append(f"{hip['bundles']} offload bundles: {len(hip['gfx'])} gfx targets")
    intel = analysis.get("intel")
    if intel and (intel.get("sycl") or intel.get("zebins")):
        parts.append(f"SYCL {'/'.join(intel.get('sycl') or ['?'])}: {intel.get('zebins', 0)} "
                     f"zebins in {intel.get('archives', 0)} ocloc archives")
    return "; ".join(parts) or "GPU code"


@register
class GpuBinaries(Collector):
    id = "gpu-binaries"
    # 3: the file's sha256; 4: device_code per file; 5: Intel SYCL code; 6: every ELF file's
    # sha256 and build-id in its analysis (the fingerprint database identifies by them)
    version = "6"
    phase = 2
    paths = PATHS

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        fs = ctx.fs
        for entry in fs.entries():
            analysis = entry.analysis
            if not analysis or entry.kind not in (EntryKind.FILE, EntryKind.HARDLINK):
                continue
            path = entry.path
            if entry.kind is EntryKind.HARDLINK:
                target = fs.lookup(entry.linkname or "", follow=False) if entry.linkname else None
                if target is not None and target.analysis is not None:
                    continue  # reported at the file it links to
            for kind in ("cuda", "hip", "intel"):
                part = analysis.get(kind) or {}
                if part.get("errors"):
                    msgs = part.get("error_messages") or []
                    ctx.unknown(
                        f"{kind} device code partly undecodable ({part['errors']} errors)"
                        + (f": {msgs[0]}" if msgs else ""),
                        path,
                    )
            props = properties(analysis)
            if not props:
                continue
            name, version, is_lib = name_version(path)
            ev = dataclasses.replace(
                ctx.evidence(EvidenceMethod.ELF.value, path, _detail(analysis)),
                sha256=analysis.get("sha256"),
            )
            kind = ("library" if is_lib else "executable" if _is_executable(path)
                    else "code-object")
            code = DeviceCode(path=path, targets=dict(props), kind=kind, format=_format(path),
                              layer=ev.layer, sha256=ev.sha256, collector=self.id,
                              detail=ev.detail)
            yield Component(
                name=name,
                version=version,
                type=ComponentType.LIBRARY
                if is_lib
                else ComponentType.APPLICATION
                if _is_executable(path)
                else ComponentType.FILE,
                properties=props,
                evidence=[ev],
                ecosystem="generic",
                device_code=[code],
            )
