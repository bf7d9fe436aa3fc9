"""rocm: AMD ROCm installs, the HIP runtime and the ROCm libraries.

What it reads, and what each source proves:

- A ROCm *install* (``/opt/rocm-X.Y.Z``, and ``/opt/rocm`` when it is a directory or a
  link to one): its release comes from ``.info/version`` (and ``.info/version-dev``:
  rocm-core writes ``MAJOR.MINOR.PATCH[.POINT]``, older releases ``X.Y.Z-BUILD``), from
  ``include/rocm-core/rocm_version.h`` (``ROCM_VERSION_MAJOR/MINOR/PATCH``) and from the
  versioned directory name. One ``rocm-core`` component per install carries
  ``release``; sources that disagree are reported in ``disagreement``.
  ``librocm-core.so.*`` is evidence of the same install.
- Libraries by file name (``libamdhip64.so.5.2.21153``, ``librocblas.so.4.2.60200``,
  ``libMIOpen.so.1.0.60200`` ...) under ROCm roots and the system library directories.
  HIP's file name carries HIP's own version (``MAJOR.MINOR.PATCH``, patch = build); the
  other libraries' file names carry an ABI version (plus, in AMD's builds, the ROCm
  "libpatch" number), so their version comes from the owning package when a package
  database knows it, and is left unknown otherwise (``file-version`` keeps what the
  name says).
- Header-only libraries by their version headers: rocPRIM
  (``rocprim/rocprim_version.hpp``) and hipCUB (``hipcub/hipcub_version.hpp``).
- Tools: ``rocminfo``, ``rocm-smi`` (version from the owning package).

False-positive guard: a library outside any ROCm install (e.g. Debian's
``libamdhip64-5`` in ``/usr/lib/x86_64-linux-gnu``) is reported with ``install`` =
``distro-package`` (or ``unmanaged`` when no package owns it) and never with a
``release``: a lone distro HIP runtime is not "ROCm installed".

The products and their files are the catalog's: the library stems (``names.yaml``), and
the rows' fields: the release row's ``install_root`` and ``libraries`` (``librocm-core``),
``release_sonames`` (file name = own version), ``release_table`` (HIP -> ROCm release),
``version_header``/``version_macro`` (header-only libraries) and ``bin`` (tools).

One module over 500 lines: one collector of one stack, whose readers (installs, libraries,
headers, packages) feed the same per-install observations.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..catalog import Product, detection, names
from ..errors import UnsafeArchiveError
from ..fsview.spec import PathSpec
from ..fsview.types import EntryKind
from ..model import Component, ComponentType, Evidence, EvidenceMethod
from . import register
from ._amd_intel import (
    AMD,
    LIB_DIRS,
    header_defines,
    lib_specs,
    observation,
    owned_version,
    real_files,
    soname_version,
)
from ._classify import hits as classifier_hits
from ._classify import paths_for as classifier_paths
from .base import CollectContext, Collector
from .strategies.classified import products as classifier_products

__all__ = ["ROCM_LIBRARIES", "RocmCollector", "parse_info_version", "parse_rocm_version_h"]

STACK = "rocm"


def _release_row() -> Product:
    row = detection.row_with(STACK, "install_root")
    if row is None or not row.libraries:  # a packaging bug: tests load the catalog
        raise RuntimeError(f"catalog: no row of stack {STACK} names its install root")
    return row


#: the release's row (``install_root``): the install root (``/opt/rocm``; versioned
#: siblings ``/opt/rocm-X.Y.Z``), the product of an install (its collector product) and the
#: library whose presence in the root's lib directory marks an install (its ``libraries``)
_RELEASE = _release_row()
ROOT = detection.str_field(_RELEASE, "install_root") or ""
RELEASE_PRODUCT = _RELEASE.found_as[1]
CORE_LIB = _RELEASE.libraries[0]
_ROOT_PARENT, _ROOT_NAME = posixpath.split(ROOT)

#: soname stem -> (product id, the file name carries the product's own version); the stems
#: and products are the catalog's (names.yaml, which ``scan --sbom`` classification reads
#: too), the stems whose file name is the version the rows' ``release_sonames``
_OWN_VERSION = frozenset(detection.listed(STACK, "release_sonames"))
ROCM_LIBRARIES: dict[str, tuple[str, bool]] = {
    stem: (product, stem in _OWN_VERSION) for stem, product in names.libraries(STACK).items()
}
#: product -> the table of its versions' ROCm releases (a row's ``release_table``)
RELEASE_TABLES = {
    f.product: t for f in detection.found(STACK) if (t := detection.str_field(f.row, "release_table"))
}

#: header-only libraries: (product, header below an include dir, macro prefix), the rows'
#: ``version_header`` and ``version_macro``
ROCM_HEADERS = tuple(
    (f.product, h, detection.str_field(f.row, "version_macro") or "")
    for f in detection.found(STACK)
    if (h := detection.str_field(f.row, "version_header"))
)
INCLUDE_DIRS = ("/usr/include", "/usr/local/include", f"{ROOT}*/include")

#: tools: (product, globs), the rows' ``bin`` under /usr/bin or an install's bin
TOOLS = tuple(
    (f.product, (f"/usr/bin/{f.bin}", f"{ROOT}*/bin/{f.bin}"))
    for f in detection.found(STACK) if f.bin
)

#: classifier products that name the ROCm release that built a binary (no library is
#: that product: the compiler ident in ``.comment``)
RELEASE_CLASSIFIERS = tuple(p for p in classifier_products(STACK)
                            if p not in {lp for lp, _ in ROCM_LIBRARIES.values()})

ROCM_DIRS = (ROOT, f"{ROOT}-*")
_ROCM_DIR_RX = re.compile("^" + re.escape(_ROOT_NAME) + r"-(\d+\.\d+(?:\.\d+)*)$")
_INFO_RX = re.compile(r"^\s*(\d+\.\d+(?:\.\d+)*)(?:[-.](\S+))?\s*$")


def hip_rocm_release(hip: str, table_file: str) -> dict[str, str]:
    """The ROCm release(s) that shipped HIP ``hip`` (``5.2.21153`` -> ``5.2.3``), from the
    table ``table_file`` (the HIP row's ``release_table``: ``data/hip_rocm.json``, sources:
    AMD's ROCm repository package versions). A HIP version not in the table gives its
    major.minor only, said so; anything else, nothing."""
    import json

    from .._resources import read_text

    table = json.loads(read_text("gpusbom", table_file))["releases"]
    row = table.get(hip)
    if row is not None:
        return {
            "hip:rocm-release": ", ".join(row["rocm"]),
            "hip:rocm-release-source": row["source"],
        }
    parts = hip.split(".")
    if len(parts) == 3 and all(p.isdigit() for p in parts):
        return {
            "hip:rocm-release": f"{parts[0]}.{parts[1]}",
            "hip:rocm-release-source": "HIP major.minor (build not in the table)",
        }
    return {}


def parse_info_version(text: str) -> tuple[str, str | None] | None:
    """``.info/version`` -> (release, build or None): ``6.2.0`` -> ("6.2.0", None);
    ``5.7.0-63`` -> ("5.7.0", "63"); ``6.2.0.1`` keeps the point release."""
    for line in text.splitlines():
        if line.strip():
            m = re.match(r"^\s*(\d+\.\d+\.\d+(?:\.\d+)?)(?:-(\S+))?\s*$", line)
            return (m.group(1), m.group(2)) if m else None
    return None


def parse_rocm_version_h(text: str) -> str | None:
    d = header_defines(text, ("ROCM_VERSION_MAJOR", "ROCM_VERSION_MINOR", "ROCM_VERSION_PATCH"))
    parts = [d.get(k) for k in ("ROCM_VERSION_MAJOR", "ROCM_VERSION_MINOR", "ROCM_VERSION_PATCH")]
    if all(p is not None and p.isdigit() for p in parts):
        return ".".join(str(int(p)) for p in parts)  # type: ignore[arg-type]
    return None


#: an AMD file-name version ending in the ROCm release as MMmmpp (1.14.60204, 2.4.50203)
_LIBPATCH_RX = re.compile(r"^\d+\.\d+\.([1-9]\d{4})$")


def _ranked(inst: _Install) -> list[tuple[str, str]]:
    """(what, release) of an install, best first: the directory name is the weakest
    source, a file inside outranks it."""
    files = [(w, v) for w, v, _ in inst.sources if w != "directory name"]
    named = [(w, v) for w, v, _ in inst.sources if w == "directory name"]
    return files + named


def _release_of(inst: _Install) -> tuple[str, str] | None:
    ranked = _ranked(inst)
    return (ranked[0][1], ranked[0][0]) if ranked else None


def _lib_dirs() -> tuple[str, ...]:
    return (*LIB_DIRS, f"{ROOT}*/lib", f"{ROOT}*/lib64")


@dataclass
class _Install:
    """One ROCm installation: its root, the links to it, and its version sources."""

    root: str  # real path
    links: list[str] = field(default_factory=list)  # /opt/rocm -> root
    sources: list[tuple[str, str, Evidence]] = field(default_factory=list)  # (what, ver, ev)
    build: str | None = None


@register
class RocmCollector(Collector):
    id = "rocm"
    version = "2"
    paths = (
        PathSpec(f"{ROOT}*/.info/version", max_size=4096),
        PathSpec(f"{ROOT}*/.info/version-*", max_size=4096),
        PathSpec(f"{ROOT}*/include/rocm-core/rocm_version.h", max_size=64 * 1024),
        PathSpec(f"{ROOT}*/include/rocm_version.h", max_size=64 * 1024),
        *lib_specs((CORE_LIB,), (f"{ROOT}*/lib", f"{ROOT}*/lib64")),
        *lib_specs(ROCM_LIBRARIES, _lib_dirs()),
        *(
            PathSpec(f"{inc}/{header}", max_size=64 * 1024)
            for _, header, _ in ROCM_HEADERS
            for inc in INCLUDE_DIRS
        ),
        *(PathSpec(p, max_size=0) for _, globs in TOOLS for p in globs),
        PathSpec("/usr/libexec/rocm_smi/rocm_smi.py", max_size=0),
        *classifier_paths(classifier_products(STACK)),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        installs = self._installs(ctx)
        out: list[Component] = []
        for inst in installs.values():
            comp = self._rocm_core(ctx, inst)
            if comp is not None:
                out.append(comp)
        roots = sorted(installs, key=len, reverse=True)
        releases = {r: rel for r, i in installs.items() if (rel := _release_of(i)) is not None}
        out += self._libraries(ctx, roots, releases)
        out += self._headers(ctx, roots)
        out += self._tools(ctx, roots)
        return out

    # -- installs --------------------------------------------------------------------------

    def _installs(self, ctx: CollectContext) -> dict[str, _Install]:
        fs = ctx.fs
        found: dict[str, _Install] = {}
        try:
            names = fs.listdir(_ROOT_PARENT) if fs.is_dir(_ROOT_PARENT) else []
        except (OSError, LookupError):
            names = []
        for name in names:
            if name != _ROOT_NAME and not _ROCM_DIR_RX.match(name):
                continue
            path = f"{_ROOT_PARENT}/{name}"
            try:
                entry = fs.lookup(path, follow=False)
                real = fs.realpath(path)
            except UnsafeArchiveError:
                continue
            if not fs.is_dir(real):
                continue
            inst = found.setdefault(real, _Install(real))
            if entry is not None and entry.kind is EntryKind.SYMLINK:
                inst.links.append(path)
        for inst in found.values():
            self._read_release(ctx, inst)
        # a directory that is only a name (no version file, no header, no versioned name)
        # is not a ROCm install we can describe
        return {r: i for r, i in found.items() if i.sources or self._has_core_lib(ctx, r)}

    @staticmethod
    def _has_core_lib(ctx: CollectContext, root: str) -> bool:
        return bool(
            real_files(ctx, [f"{root}/lib/{CORE_LIB}.so*", f"{root}/lib64/{CORE_LIB}.so*"])
        )

    def _read_release(self, ctx: CollectContext, inst: _Install) -> None:
        fs = ctx.fs
        root = inst.root
        for rel in (".info/version", ".info/version-dev"):
            path = f"{root}/{rel}"
            if not fs.is_file(path):
                continue
            try:
                parsed = parse_info_version(fs.read_text(path))
            except (OSError, LookupError) as e:
                ctx.unknown(f"cannot read ROCm version file: {e}", path)
                continue
            if parsed is None:
                ctx.unknown("ROCm version file holds no MAJOR.MINOR.PATCH", path)
                continue
            rel_ver, build = parsed
            inst.build = inst.build or build
            ev = ctx.evidence(EvidenceMethod.VERSION_FILE.value, path, f"{rel}: {rel_ver}")
            inst.sources.append((rel, rel_ver, ev))
        for rel in ("include/rocm-core/rocm_version.h", "include/rocm_version.h"):
            path = f"{root}/{rel}"
            if not fs.is_file(path):
                continue
            try:
                ver = parse_rocm_version_h(fs.read_text(path))
            except (OSError, LookupError) as e:
                ctx.unknown(f"cannot read rocm_version.h: {e}", path)
                continue
            if ver is None:
                continue  # the old wrapper header only includes rocm-core/rocm_version.h
            ev = ctx.evidence(EvidenceMethod.HEADER.value, path, f"ROCM_VERSION {ver}")
            inst.sources.append(("rocm_version.h", ver, ev))
            break
        m = _ROCM_DIR_RX.match(posixpath.basename(root))
        if m:
            ev = ctx.evidence(
                EvidenceMethod.FILENAME.value, root, f"versioned ROCm directory {m.group(1)}"
            )
            inst.sources.append(("directory name", m.group(1), ev))

    def _rocm_core(self, ctx: CollectContext, inst: _Install) -> Component | None:
        evidence = [ev for _, _, ev in inst.sources]
        ranked = _ranked(inst)
        release = ranked[0][1] if ranked else None
        props: dict[str, str] = {"install": "rocm"}
        for lib in real_files(
            ctx, [f"{inst.root}/lib/{CORE_LIB}.so*", f"{inst.root}/lib64/{CORE_LIB}.so*"]
        ):
            fv = soname_version(lib, CORE_LIB)
            evidence.append(
                ctx.evidence(EvidenceMethod.SONAME.value, lib, f"{CORE_LIB} file version {fv}")
            )
        if not evidence:
            return None
        if release:
            props["release"] = release
            others = sorted(
                {
                    f"{w} says {v}"
                    for w, v in ranked
                    if v != release and not v.startswith(release + ".")
                }
            )
            if others:
                props["disagreement"] = f"ROCm {release} ({ranked[0][0]}), but " + "; ".join(others)
        if inst.build:
            props["build"] = inst.build
        if inst.links:
            props["linked-from"] = ", ".join(sorted(inst.links))
        return observation(
            ctx,
            product=RELEASE_PRODUCT,
            version=release,
            vendor=AMD,
            stack=STACK,
            location=inst.root,
            evidence=evidence,
            properties=props,
            type=ComponentType.FRAMEWORK,
        )

    # -- libraries, headers, tools -----------------------------------------------------------

    @staticmethod
    def _root_of(path: str, roots: list[str]) -> str | None:
        for r in roots:
            if path.startswith(r.rstrip("/") + "/"):
                return r
        return None

    def _placement(
        self, ctx: CollectContext, path: str, roots: list[str]
    ) -> tuple[dict[str, str], str | None, str | None]:
        """(properties, package upstream version, evidence detail about the package)."""
        props: dict[str, str] = {}
        root = self._root_of(path, roots)
        owned = owned_version(ctx, path)
        if root is not None:
            props["install"] = "rocm"
            props["rocm-root"] = root
        elif owned is not None:
            props["install"] = "distro-package"
        else:
            props["install"] = "unmanaged"
        if owned is None:
            return props, None, None
        return props, owned.version, owned.detail

    def _libraries(
        self, ctx: CollectContext, roots: list[str], releases: dict[str, tuple[str, str]]
    ) -> list[Component]:
        out: list[Component] = []
        dirs = list(LIB_DIRS) + [f"{r}/{d}" for r in roots for d in ("lib", "lib64")]
        for stem, (product, own_version) in ROCM_LIBRARIES.items():
            for path in real_files(ctx, [f"{d}/{stem}.so*" for d in dirs]):
                fv = soname_version(path, stem)
                props, pkg_ver, pkg_detail = self._placement(ctx, path, roots)
                if fv:
                    props["file-version"] = fv
                # HIP's file name is its version only with all three parts (5.2.21153)
                if own_version and fv and fv.count(".") == 2:
                    version: str | None = fv
                    detail = f"{posixpath.basename(path)}: {product} {fv}"
                else:
                    version = pkg_ver
                    detail = f"{posixpath.basename(path)}" + (
                        f"; {pkg_detail}" if pkg_detail else ""
                    )
                evidence = [ctx.evidence(EvidenceMethod.SONAME.value, path, detail)]
                for hit in classifier_hits(ctx.fs.analysis(path), path, [product]):
                    # the library's own HIP_VERSION (hipRuntimeGetVersion): the longer wins
                    evidence.append(
                        ctx.evidence(hit.method, path, f"{hit.detail} ({hit.row.confidence})")
                    )
                    if hit.version and len(hit.version) > len(version or ""):
                        if version and not hit.version.startswith(version + "."):
                            props["disagreement"] = f"{version} from {detail}"
                        version = hit.version
                        props["version-method"] = hit.method
                        props["version-confidence"] = hit.row.confidence
                if product in RELEASE_TABLES and version:
                    props.update(hip_rocm_release(version, RELEASE_TABLES[product]))
                elif not own_version:
                    version = self._rocm_release_version(
                        ctx, path, fv, version, props, evidence, releases
                    )
                out.append(
                    observation(
                        ctx,
                        product=product,
                        version=version,
                        vendor=AMD,
                        stack=STACK,
                        location=posixpath.dirname(path),
                        evidence=evidence,
                        properties=props,
                    )
                )
        return out

    def _rocm_release_version(
        self,
        ctx: CollectContext,
        path: str,
        fv: str | None,
        version: str | None,
        props: dict[str, str],
        evidence: list[Evidence],
        releases: dict[str, tuple[str, str]],
    ) -> str | None:
        """A ROCm library whose file name holds an ABI version (HSA runtime, comgr,
        rocm-smi-lib, ...) and no package that says its version: the ROCm release it
        belongs to, from the library itself where it carries one, else from its install.

        1. AMD's file names end in the release as a "libpatch" (``libhsa-runtime64.so.
           1.14.60204``: ROCm 6.2.4; ``MAJOR*10000 + MINOR*100 + PATCH``), read from the
           component itself (``file-name-libpatch``, medium);
        2. the AMD compiler ident in ``.comment`` (``AMD clang version ... roc-5.4.2``):
           the release that built it (``elf-rodata``, medium);
        3. the ``/opt/rocm-X.Y.Z`` install's release (``.info/version``, rocm_version.h or
           the directory name): ``rocm-install``, low.
        The version is then the ROCm release (the numbering of the components' git tags,
        rocm-X.Y.Z, and of Debian's packages: libhsa-runtime64-1 5.2.3), and
        ``version-scheme`` says so; an AMD file name's own MAJOR.MINOR is ``own-version``."""
        if version:  # a package says it
            return version
        found: tuple[str, str, str] | None = None
        if fv:
            m = _LIBPATCH_RX.match(fv)
            if m:
                code = int(m.group(1))
                rel = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
                found = (rel, "file-name-libpatch", "medium")
                # the rest is the component's own MAJOR.MINOR (rocBLAS 4.2 of ROCm 6.2.0)
                props["own-version"] = fv.rsplit(".", 1)[0]
        for hit in classifier_hits(ctx.fs.analysis(path), path, RELEASE_CLASSIFIERS):
            evidence.append(ctx.evidence(hit.method, path, f"{hit.detail} ({hit.row.confidence})"))
            if found is None and hit.version:
                found = (hit.version, hit.method, hit.row.confidence)
        root = self._root_of(path, list(releases))
        if root is not None:
            rel, what = releases[root]
            if found is None:
                found = (rel, "rocm-install", "low")
                props["rocm-release-source"] = f"{root} {what}"
            elif found[0] != rel:
                props["disagreement"] = f"ROCm {found[0]} ({found[1]}), but {root} says {rel}"
        if found is None:
            return None
        props["rocm-release"] = found[0]
        props["version-scheme"] = "rocm-release"
        props["version-method"] = found[1]
        props["version-confidence"] = found[2]
        return found[0]

    def _headers(self, ctx: CollectContext, roots: list[str]) -> list[Component]:
        fs = ctx.fs
        out: list[Component] = []
        incs = ["/usr/include", "/usr/local/include"] + [f"{r}/include" for r in roots]
        for product, header, prefix in ROCM_HEADERS:
            seen: set[str] = set()
            for inc in incs:
                path = f"{inc}/{header}"
                if not fs.is_file(path):
                    continue
                real = fs.realpath(path)
                if real in seen:
                    continue
                seen.add(real)
                try:
                    d = header_defines(
                        fs.read_text(real),
                        (f"{prefix}_MAJOR", f"{prefix}_MINOR", f"{prefix}_PATCH"),
                    )
                except (OSError, LookupError) as e:
                    ctx.unknown(f"cannot read {product} version header: {e}", real)
                    continue
                parts = [d.get(f"{prefix}_{k}") for k in ("MAJOR", "MINOR", "PATCH")]
                if not all(p is not None and p.isdigit() for p in parts):
                    continue
                ver = ".".join(str(int(p)) for p in parts)  # type: ignore[arg-type]
                props, _, pkg_detail = self._placement(ctx, real, roots)
                detail = f"{prefix}_MAJOR/MINOR/PATCH {ver}" + (
                    f"; {pkg_detail}" if pkg_detail else ""
                )
                ev = ctx.evidence(EvidenceMethod.HEADER.value, real, detail)
                out.append(
                    observation(
                        ctx,
                        product=product,
                        version=ver,
                        vendor=AMD,
                        stack=STACK,
                        location=posixpath.dirname(posixpath.dirname(real)),
                        evidence=[ev],
                        properties=props,
                    )
                )
        return out

    def _tools(self, ctx: CollectContext, roots: list[str]) -> list[Component]:
        fs = ctx.fs
        out: list[Component] = []
        for product, globs in TOOLS:
            seen: set[str] = set()
            for pattern in globs:
                for path in fs.glob(pattern):
                    try:
                        real = fs.realpath(path)
                    except UnsafeArchiveError:
                        continue
                    if real in seen or not fs.is_file(path):
                        continue
                    seen.add(real)
                    props, pkg_ver, pkg_detail = self._placement(ctx, path, roots)
                    if self._root_of(real, roots) and "rocm-root" not in props:
                        props["install"] = "rocm"
                    detail = product + (f"; {pkg_detail}" if pkg_detail else "")
                    ev = ctx.evidence(EvidenceMethod.FILENAME.value, path, detail)
                    out.append(
                        observation(
                            ctx,
                            product=product,
                            version=pkg_ver,
                            vendor=AMD,
                            stack=STACK,
                            location=posixpath.dirname(path),
                            evidence=[ev],
                            properties=props,
                            type=ComponentType.APPLICATION,
                        )
                    )
        return out
