"""opencl: OpenCL ICDs (installable client drivers) and the OpenCL ICD loader.

An OpenCL ICD is registered by a ``/etc/OpenCL/vendors/*.icd`` file holding one
line: the library to load, an absolute path or a bare file name the dynamic
linker finds (``libpocl.so.2.10.0``, ``libnvidia-opencl.so.1``,
``/opt/intel/.../libigdrcl.so``). Each ICD is reported as one component named
after the driver it loads (``pocl``, ``nvidia-opencl``, ``intel-opencl``, ...)
with the library resolved inside the image and its version from, in order:
the version string the library carries (PoCL: ``OpenCL 3.0 PoCL 3.1``), the
owning package, the file name (``libnvidia-opencl.so.580.95.05``). A library
the ICD names but the image lacks is reported too (``icd-library-missing``).

Environment overrides, from the image config: ``OCL_ICD_VENDORS`` (another
vendors directory, or one ``.icd`` file) and ``OCL_ICD_FILENAMES`` (a ``:``
list of libraries, loaded as ICDs without any ``.icd`` file).

The ICD loader itself (``libOpenCL.so.1``) is reported as
``opencl-icd-loader``; its file name version (``1.0.0``) is the ABI, not the
loader's release, so the version comes from the owning package when known.

The helpers at the top (library search, file-name versions, bounded byte scans)
are shared with the Vulkan collector. Nothing in the image is executed.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from packageurl import PackageURL

from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, Evidence, EvidenceMethod
from . import register
from .base import CollectContext, Collector

__all__ = [
    "LIBRARY_PATHS",
    "OpenCLCollector",
    "find_library",
    "generic_purl",
    "library_dirs",
    "package_version",
    "scan_bytes",
    "soname_version",
]

VENDORS_DIR = "/etc/OpenCL/vendors"
_SMALL = 64 * 1024
_LIB_CONTENT = 64 * 1024 * 1024
_CHUNK = 1 << 20
_OVERLAP = 512

#: record every shared library (without content) so ICDs and loaders can be resolved
LIBRARY_PATHS = (
    PathSpec("/**/*.so", max_size=0),
    PathSpec("/**/*.so.*", max_size=0),
    PathSpec("/etc/ld.so.conf", max_size=_SMALL),
    PathSpec("/etc/ld.so.conf.d/*.conf", max_size=_SMALL),
)

_DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/usr/local/lib64")
_TRIPLET_GLOBS = ("/usr/lib/*-linux-gnu*", "/lib/*-linux-gnu*", "/usr/local/lib/*-linux-gnu*")
_SOVER_RX = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")
_EPOCH_RX = re.compile(r"^\d+:")


# -- helpers shared with the Vulkan collector ------------------------------------------------


def _ld_so_conf_dirs(ctx: CollectContext, path: str, depth: int = 0) -> list[str]:
    out: list[str] = []
    if depth > 4:
        return out
    try:
        if not ctx.fs.is_file(path):
            return out
        text = ctx.fs.read_text(path)
    except Exception:  # noqa: BLE001 - an unreadable ld.so.conf only narrows the search
        return out
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pat = line[len("include") :].strip()
            if not pat.startswith("/"):
                pat = posixpath.join(posixpath.dirname(path), pat)
            for inc in ctx.fs.glob(pat):
                out.extend(_ld_so_conf_dirs(ctx, inc, depth + 1))
        elif line.startswith("/"):
            out.append(line.split("=", 1)[0].rstrip("/") or "/")
    return out


def library_dirs(ctx: CollectContext) -> list[str]:
    """Directories the dynamic linker searches, in order: LD_LIBRARY_PATH (image env),
    ld.so.conf, the default and multiarch directories. Only those present in the image."""
    cand: list[str] = []
    for d in (ctx.target.env.get("LD_LIBRARY_PATH") or "").split(":"):
        if d.startswith("/"):
            cand.append(d.rstrip("/") or "/")
    cand.extend(_ld_so_conf_dirs(ctx, "/etc/ld.so.conf"))
    for g in _TRIPLET_GLOBS:
        cand.extend(ctx.fs.glob(g))
    cand.extend(_DEFAULT_DIRS)
    out: list[str] = []
    seen: set[str] = set()
    for d in cand:
        try:
            real = ctx.fs.realpath(d)
        except Exception:  # noqa: BLE001, S112 - a loop in a search dir: skip it
            continue
        if real in seen or not ctx.fs.is_dir(d):
            continue
        seen.add(real)
        out.append(d)
    return out


def find_library(
    ctx: CollectContext, name: str, dirs: list[str] | None = None, base: str | None = None
) -> str | None:
    """Where ``name`` resolves inside the image: an absolute path as is, a relative path with
    a ``/`` against ``base``, a bare file name in the library search directories."""
    name = name.strip()
    if not name:
        return None
    if name.startswith("/"):
        cands = [name]
    elif "/" in name:
        cands = [posixpath.normpath(posixpath.join(base or "/", name))]
    else:
        cands = [posixpath.join(d, name) for d in (dirs if dirs is not None else library_dirs(ctx))]
    for c in cands:
        if ctx.fs.is_file(c):
            return c
    return None


def soname_version(path: str) -> str | None:
    """``1.3.239`` of ``libvulkan.so.1.3.239``; None for an unversioned ``.so``."""
    m = _SOVER_RX.search(posixpath.basename(path))
    return m.group(1) if m else None


def package_version(pkg: Component | None) -> str | None:
    """The upstream version of a package component: no epoch, no Debian/RPM/apk revision."""
    if pkg is None or not pkg.version:
        return None
    v = pkg.version
    if pkg.ecosystem in ("deb", "rpm", "apk"):
        v = _EPOCH_RX.sub("", v)
        if "-" in v:
            v = v.rsplit("-", 1)[0]
    return v or None


def scan_bytes(
    ctx: CollectContext, path: str, rx: re.Pattern[bytes], limit: int = _LIB_CONTENT
) -> re.Match[bytes] | None:
    """The first match of ``rx`` in the first ``limit`` bytes of ``path``, read in 1 MiB
    chunks (memory stays bounded); None when absent or the content was not kept."""
    from ..fsview.view import NotCapturedError

    try:
        f = ctx.fs.open(path)
    except (NotCapturedError, FileNotFoundError, IsADirectoryError):
        return None
    tail = b""
    read = 0
    with f:
        while read < limit:
            chunk = f.read(min(_CHUNK, limit - read))
            if not chunk:
                break
            read += len(chunk)
            buf = tail + chunk
            m = rx.search(buf)
            if m is not None:
                return m
            tail = buf[-_OVERLAP:]
    return None


def generic_purl(vendor: str | None, name: str, version: str | None) -> str:
    return PackageURL(
        type="generic", namespace=vendor or None, name=name, version=version
    ).to_string()


def package_label(pkg: Component | None) -> str | None:
    if pkg is None:
        return None
    return f"{pkg.name} {pkg.version}" if pkg.version else pkg.name


# -- OpenCL ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Driver:
    product: str
    vendor: str | None
    supplier: str | None
    #: the file name's version is the product's (NVIDIA: driver version); else an ABI number
    soname_is_version: bool = False
    #: regex on the library bytes giving the product version
    embedded: re.Pattern[bytes] | None = None
    cpe: str | None = None  # cpe template with {v}
    #: the driver's own name when the product is a suite shipping several (Mesa)
    driver: str | None = None


_POCL_RX = re.compile(rb"PoCL (\d+\.\d+(?:\.\d+)?(?:-pre|-rc\d*)?)")
_DRIVERS: dict[str, _Driver] = {
    "libpocl": _Driver(
        "pocl",
        "pocl",
        "PoCL project",
        embedded=_POCL_RX,
        cpe="cpe:2.3:a:pocl:pocl:{v}:*:*:*:*:*:*:*",
    ),
    "libnvidia-opencl": _Driver("nvidia-opencl", "nvidia", "NVIDIA Corporation", True),
    "libigdrcl": _Driver("intel-opencl", "intel", "Intel Corporation"),
    "libigdrcl_legacy1": _Driver("intel-opencl-legacy", "intel", "Intel Corporation"),
    "libintelocl": _Driver("intel-cpu-opencl", "intel", "Intel Corporation"),
    "libintelocl_emu": _Driver("intel-fpga-emu-opencl", "intel", "Intel Corporation"),
    "libamdocl64": _Driver("rocm-opencl", "amd", "Advanced Micro Devices, Inc."),
    "libamdocl-orca64": _Driver("amd-orca-opencl", "amd", "Advanced Micro Devices, Inc."),
    "libMesaOpenCL": _Driver(
        "mesa", "mesa", "Mesa", cpe="cpe:2.3:a:mesa3d:mesa:{v}:*:*:*:*:*:*:*", driver="clover"
    ),
    "libRusticlOpenCL": _Driver(
        "mesa", "mesa", "Mesa", cpe="cpe:2.3:a:mesa3d:mesa:{v}:*:*:*:*:*:*:*", driver="rusticl"
    ),
}
_LOADER = "libOpenCL.so.1"


def _lib_stem(name: str) -> str:
    base = posixpath.basename(name)
    i = base.find(".so")
    return base[:i] if i > 0 else base


def _driver_for(lib_name: str) -> _Driver:
    stem = _lib_stem(lib_name)
    d = _DRIVERS.get(stem)
    if d is not None:
        return d
    product = stem[3:] if stem.startswith("lib") and len(stem) > 3 else stem
    return _Driver(product.lower() or "opencl-icd", None, None)


@register
class OpenCLCollector(Collector):
    id = "opencl"
    version = "1"
    paths = (
        PathSpec(VENDORS_DIR + "/*.icd", max_size=_SMALL),
        PathSpec("/**/*.icd", max_size=_SMALL),  # OCL_ICD_VENDORS may name another directory
        PathSpec("/**/libpocl.so*", max_size=_LIB_CONTENT),
        *LIBRARY_PATHS,
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        env = ctx.target.env
        dirs = library_dirs(ctx)
        out: list[Component] = []
        vendors_env = (env.get("OCL_ICD_VENDORS") or "").strip()
        icd_files: list[tuple[str, str | None]] = []  # (icd file, env override text)
        if vendors_env:
            note = f"OCL_ICD_VENDORS={vendors_env}"
            target = (
                vendors_env
                if vendors_env.startswith("/")
                else posixpath.join(VENDORS_DIR, vendors_env)
            )
            if ctx.fs.is_dir(target):
                icd_files += [(p, note) for p in ctx.fs.glob(target.rstrip("/") + "/*.icd")]
            elif ctx.fs.is_file(target):
                icd_files.append((target, note))
        for p in ctx.fs.glob(VENDORS_DIR + "/*.icd"):
            if all(p != q for q, _ in icd_files):
                icd_files.append((p, None))
        for icd, override in icd_files:
            comp = self._from_icd(ctx, icd, dirs, override, vendors_env)
            if comp is not None:
                out.append(comp)
        files_env = (env.get("OCL_ICD_FILENAMES") or "").strip()
        for lib in (x.strip() for x in files_env.split(":")):
            if lib:
                out.append(
                    self._icd_component(
                        ctx,
                        lib,
                        find_library(ctx, lib, dirs),
                        dirs,
                        [
                            ctx.evidence(
                                EvidenceMethod.ENV.value, None, f"OCL_ICD_FILENAMES={files_env}"
                            )
                        ],
                        {"icd-source": "OCL_ICD_FILENAMES"},
                    )
                )
        out.extend(self._loaders(ctx, dirs))
        return out

    # -- ICDs ----------------------------------------------------------------------------------

    def _from_icd(
        self, ctx: CollectContext, icd: str, dirs: list[str], override: str | None, vendors_env: str
    ) -> Component | None:
        try:
            text = ctx.fs.read_text(icd)
        except Exception as e:  # noqa: BLE001
            ctx.unknown(f"cannot read OpenCL ICD file: {e}", icd)
            return None
        lines = [ln.strip() for ln in text.replace("\0", "").splitlines() if ln.strip()]
        if not lines:
            ctx.unknown("empty OpenCL ICD file", icd)
            return None
        lib = lines[0]
        props = {"icd": icd, "icd-source": "OCL_ICD_VENDORS" if override else VENDORS_DIR}
        if override is None and vendors_env:
            props["overridden-by"] = f"OCL_ICD_VENDORS={vendors_env}"
        ev = [
            ctx.evidence(
                EvidenceMethod.FILENAME.value, icd, f"ICD {posixpath.basename(icd)}: {lib}"
            )
        ]
        if override:
            ev.append(ctx.evidence(EvidenceMethod.ENV.value, None, override))
        pkg = ctx.owner(icd)
        if pkg is not None:
            props["icd-package"] = package_label(pkg) or ""
        return self._icd_component(
            ctx,
            lib,
            find_library(ctx, lib, dirs, posixpath.dirname(icd)),
            dirs,
            ev,
            props,
            icd_owner=pkg,
        )

    def _icd_component(
        self,
        ctx: CollectContext,
        lib: str,
        found: str | None,
        dirs: list[str],
        evidence: list[Evidence],
        props: dict[str, str],
        icd_owner: Component | None = None,
    ) -> Component:
        drv = _driver_for(lib)
        props = {
            "stack": "opencl",
            "product": drv.product,
            "opencl:driver": drv.driver or drv.product,
            "icd-library": lib,
            **props,
        }
        version: str | None = None
        how: str | None = None
        if found is None:
            props["icd-library-missing"] = "true"
            # the ICD's own package names the driver's release (pocl-opencl-icd 3.1-3)
            if icd_owner is not None and drv.vendor is not None and not drv.soname_is_version:
                version, how = package_version(icd_owner), "package of the ICD file"
        else:
            real = ctx.fs.realpath(found)
            props["library"] = real
            props["location"] = posixpath.dirname(real)
            sover = soname_version(real)
            if sover:
                props["soname-version"] = sover
            lib_owner = ctx.owner(real)
            if lib_owner is not None:
                props["library-package"] = package_label(lib_owner) or ""
            evidence = list(evidence)
            if drv.embedded is not None:
                m = scan_bytes(ctx, real, drv.embedded)
                if m is not None:
                    version, how = m.group(1).decode("ascii", "replace"), "embedded"
                    evidence.append(
                        ctx.evidence(
                            EvidenceMethod.ELF.value, real, m.group(0).decode("ascii", "replace")
                        )
                    )
            if version is None and drv.soname_is_version and sover:
                version, how = sover, "soname"
            if version is None and lib_owner is not None:
                version, how = package_version(lib_owner), "package"
            if version is None and icd_owner is not None and drv.vendor is not None:
                version, how = package_version(icd_owner), "package of the ICD file"
            if version is None and drv.vendor is None and sover and sover.count(".") >= 2:
                version, how = sover, "soname"
            evidence.append(
                ctx.evidence(
                    EvidenceMethod.SONAME.value if sover else EvidenceMethod.FILENAME.value,
                    real,
                    posixpath.basename(real),
                )
            )
        if how:
            props["version-source"] = how
        return Component(
            name=drv.product,
            version=version,
            type=ComponentType.LIBRARY,
            purl=generic_purl(drv.vendor, drv.product, version),
            cpe=drv.cpe.format(v=version) if drv.cpe and version else None,
            supplier=drv.supplier,
            properties=props,
            evidence=list(evidence),
            ecosystem="generic",
        )

    # -- the ICD loader ------------------------------------------------------------------------

    def _loaders(self, ctx: CollectContext, dirs: list[str]) -> Iterator[Component]:
        seen: set[str] = set()
        for d in dirs:
            path = posixpath.join(d, _LOADER)
            if not ctx.fs.is_file(path):
                continue
            real = ctx.fs.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            owner = ctx.owner(real)
            version = package_version(owner)
            props = {
                "stack": "opencl",
                "product": "opencl-icd-loader",
                "location": posixpath.dirname(real),
                "library": real,
            }
            sover = soname_version(real)
            if sover:
                props["soname-version"] = sover
            vendor = "khronos"
            if owner is not None:
                props["library-package"] = package_label(owner) or ""
                props["version-source"] = "package"
                if owner.name.startswith("ocl-icd"):
                    vendor, props["implementation"] = "ocl-icd", "ocl-icd"
            yield Component(
                name="opencl-icd-loader",
                version=version,
                type=ComponentType.LIBRARY,
                purl=generic_purl(vendor, "opencl-icd-loader", version),
                supplier="Khronos Group" if vendor == "khronos" else None,
                properties=props,
                evidence=[
                    ctx.evidence(EvidenceMethod.SONAME.value, real, posixpath.basename(real))
                ],
                ecosystem="generic",
            )
