"""cuda: the CUDA toolkit release and its components, cuDNN, NCCL, TensorRT, NVSHMEM,
cuSPARSELt and cuTENSOR, one component per (product, install location).

Products (component ``name`` = ``product``): ``cuda-toolkit`` (the release, property
``release``), ``cudart``, ``nvcc``, ``nvrtc``, ``nvjitlink``, ``cublas`` (with cuBLASLt),
``cufft``, ``curand``, ``cusolver``, ``cusparse``, ``npp``, ``nvjpeg``, ``cupti``, ``cudnn``,
``nccl``, ``tensorrt``, ``nvshmem``, ``cusparselt``, ``cutensor``.

Evidence, by version priority (highest wins; a lower source whose version is not a prefix
of the chosen one is reported in ``disagreement``):

5. ``version.json`` of a toolkit root (``/usr/local/cuda*``): the ``cuda`` entry is the
   release; per-component entries give versions of components *seen as files* at that root
   (version.json lists the whole SDK even when a runtime image holds a part of it);
4. package metadata: ``nvidia-*`` wheels (cu12 ``nvidia/<comp>`` layout and the cu13 shared
   ``nvidia/cu13`` layout, located through the wheel's RECORD), ``conda-meta`` records,
   ``version.txt`` (CUDA <= 11.0: ``CUDA Version 11.0.207``);
3. versioned sonames (regular files only: ``libcudart.so.12.4.127``; ``.so`` and
   ``.so.<major>`` names are not versions) and full-version headers (``cudnn_version.h``,
   ``nccl.h``, ``NvInferVersion.h``);
2. image env ``CUDA_VERSION`` (on the toolkit the image's ``/usr/local/cuda`` points at);
1. ``cuda.h`` ``CUDA_VERSION`` / ``cuda_runtime_api.h`` ``CUDART_VERSION`` (major.minor);
0. the root's directory name (``cuda-12.4``).

``NV_*`` env vars (``NV_CUDA_CUDART_VERSION``, ``NV_CUDNN_VERSION``, ``NV_LIBNCCL_PACKAGE``,
``NV_LIBCUBLAS_VERSION``, ...) are recorded on the toolkit component as ``env-declared``
and compared with what is installed; ``NVIDIA_REQUIRE_CUDA`` gives ``require-cuda`` and
``driver-branches``. ``CUDA_VERSION`` vs the installed cudart (major.minor) is checked.

Guards: link stubs (``*/stubs/*``) and NVIDIA files bundled in OpenAI Triton
(``triton/backends/nvidia``) are ignored; a ``cuda-toolkit`` component is only made for a
``/usr/local/cuda*`` root, a conda ``cuda-toolkit``/``cuda-version`` record, or the env.

One module over 500 lines: one collector class; its readers (sonames, classified libraries,
headers, wheels, conda records, toolkit roots, version.json, environment) add to the same
``Observations`` of one scan, whose version choice needs them all.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from functools import partial
from typing import Any

from ..catalog import names
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from ..safetext import loads_json
from . import register
from ._classify import hits as classifier_hits
from ._classify import is_executable_path
from ._classify import paths_for as classifier_paths
from ._gpu import (
    Observations,
    install_location,
    int_define,
    is_bundled,
    is_regular,
    is_stub,
    major_minor,
    parse_defines,
    parse_require_cuda,
    parse_soname,
    version_from_code,
)
from ._premade import premade
from .base import VIEW_ERRORS, CollectContext, Collector
from .python import parse_core_metadata

__all__ = ["SONAME_PRODUCTS", "CudaCollector", "header_versions", "wheel_product"]

TOOLKIT = "cuda-toolkit"

#: library stem -> product; conda package name -> product (the catalog's names.yaml,
#: which ``scan --sbom`` classification reads too)
SONAME_PRODUCTS: dict[str, str] = names.libraries("cuda")
CONDA_PRODUCTS: dict[str, str] = names.cuda_conda()

#: version.json keys -> product
VERSION_JSON_PRODUCTS: dict[str, str] = {
    "cuda_cudart": "cudart",
    "cuda_nvcc": "nvcc",
    "cuda_nvrtc": "nvrtc",
    "libnvjitlink": "nvjitlink",
    "libcublas": "cublas",
    "libcufft": "cufft",
    "libcurand": "curand",
    "libcusolver": "cusolver",
    "libcusparse": "cusparse",
    "libnpp": "npp",
    "libnvjpeg": "nvjpeg",
    "cuda_cupti": "cupti",
}

#: image env var -> product it declares (value: deb version or "pkg=version")
ENV_DECLARED = (
    ("NV_CUDA_CUDART_VERSION", "cudart"),
    ("NV_LIBCUBLAS_VERSION", "cublas"),
    ("NV_CUDNN_VERSION", "cudnn"),
    ("NV_LIBNCCL_PACKAGE_VERSION", "nccl"),
    ("NV_LIBNCCL_PACKAGE", "nccl"),
)

_P_VJSON, _P_PKG, _P_FILE, _P_ENV, _P_HEADER, _P_DIR = 5, 4, 3, 2, 1, 0

_SONAME_GLOBS = (
    "libcudart.so*",
    "libnvrtc.so*",
    "libnvrtc-builtins.so*",
    "libnvJitLink.so*",
    "libcublas.so*",
    "libcublasLt.so*",
    "libcufft.so*",
    "libcufftw.so*",
    "libcurand.so*",
    "libcusolver.so*",
    "libcusolverMg.so*",
    "libcusparse.so*",
    "libnpp*.so*",
    "libnvjpeg.so*",
    "libcupti.so*",
    "libcudnn*.so*",
    "libnccl.so*",
    "libnvinfer*.so*",
    "libnvonnxparser.so*",
    "libnvshmem_host.so*",
    "libcusparseLt.so*",
    "libcutensor.so*",
    "libcutensorMg.so*",
)
_HEADER_NAMES = ("cuda.h", "cuda_runtime_api.h", "cudnn_version*.h", "nccl.h", "NvInferVersion.h")
_HEADER_MAX = 4 * 1024 * 1024
_META_MAX = 16 * 1024 * 1024
_WHEEL_DISTS = ("nvidia_*", "tensorrt*", "cutensor*")
_TOOLKIT_ROOT_RX = re.compile(r"^/usr/local/cuda(?:-(\d+\.\d+))?$")
_VERSION_TXT_RX = re.compile(r"CUDA Version\s+(\d+(?:\.\d+)+)")
#: auditwheel's renamed copies: ``libcudart-9335f6a2.so.10.2`` (hash before ``.so``)
_RENAMED_RX = re.compile(r"^(?P<stem>lib[A-Za-z0-9_+.]+?)-(?P<hash>[0-9a-f]{8})$")
_CLASSIFIED = ("cudart", "nvrtc", "nccl", "cudnn", "cublas", "cublaslt", "cutlass")


def renamed_stem(stem: str) -> tuple[str, str] | None:
    """(original stem, hash) of an auditwheel-renamed library stem, else None."""
    m = _RENAMED_RX.match(stem)
    return (m.group("stem"), m.group("hash")) if m else None


def soname_product(stem: str) -> str | None:
    return names.library_product("cuda", stem)


def wheel_product(name: str) -> str | None:
    """``nvidia-cuda-runtime-cu12`` / ``nvidia-cuda-runtime`` -> ``cudart``; None if not ours."""
    return names.cuda_wheel(name)


def header_versions(name: str, text: str) -> dict[str, str]:
    """Versions a header declares: {"cuda-toolkit"|"cudart"|"cudnn"|"nccl"|"tensorrt": version}."""
    defs = parse_defines(text)

    def val(key: str) -> int | None:
        v = defs.get(key)
        seen = 0
        while v is not None and re.fullmatch(r"[A-Za-z_]\w*", v) and seen < 4:  # alias chain
            v = defs.get(v)
            seen += 1
        return int_define({key: v}, key) if v is not None else None

    out: dict[str, str] = {}
    if name == "cuda.h":
        code = val("CUDA_VERSION")
        if code:
            out[TOOLKIT] = version_from_code(code)
    elif name == "cuda_runtime_api.h":
        code = val("CUDART_VERSION")
        if code:
            out["cudart"] = version_from_code(code)
    elif name.startswith("cudnn_version"):
        parts = [val("CUDNN_MAJOR"), val("CUDNN_MINOR"), val("CUDNN_PATCHLEVEL")]
        if all(p is not None for p in parts):
            out["cudnn"] = ".".join(str(p) for p in parts)
    elif name == "nccl.h":
        parts = [val("NCCL_MAJOR"), val("NCCL_MINOR"), val("NCCL_PATCH")]
        if all(p is not None for p in parts):
            suffix = defs.get("NCCL_SUFFIX", "").strip('"')
            out["nccl"] = ".".join(str(p) for p in parts) + suffix
    elif name == "NvInferVersion.h":
        parts = [val("NV_TENSORRT_MAJOR"), val("NV_TENSORRT_MINOR"), val("NV_TENSORRT_PATCH")]
        if all(p is not None for p in parts):
            build = val("NV_TENSORRT_BUILD")
            out["tensorrt"] = ".".join(
                str(p) for p in parts + ([build] if build is not None else [])
            )
    return out


def _read_meta(fs: Any, path: str) -> Any:
    return parse_core_metadata(fs.read_text(path))


def _read_header(fs: Any, name: str, path: str) -> dict[str, str]:
    return header_versions(name, fs.read_text(path))


def header_wanted(path: str) -> bool:
    """Is ``path`` a header whose versions ``_headers`` reads (a host walk's worker parses
    it: ``host/premake.py``)? The glob's test, and the names'."""
    name = path[path.rfind("/") + 1 :]
    return "/include/" in path and any(fnmatch.fnmatchcase(name, h) for h in _HEADER_NAMES)


def _declared_version(var: str, value: str) -> str:
    """``libnccl2=2.28.3-1+cuda13.0`` -> ``2.28.3``; ``12.4.127-1`` -> ``12.4.127``."""
    v = value.split("=", 1)[1] if "=" in value else value
    return re.split(r"[-+~]", v, maxsplit=1)[0]


#: toolkit executables whose presence under ROOT/bin is recorded on the toolkit component
#: (``bin-tools``): a CUDA Toolkit CVE in one of them is proven not to apply when it is
#: absent (advisory rule ``cuda-part-absent``)
CHECKED_TOOLS = ("cuobjdump", "nvdisasm", "ptxas", "cu++filt", "nvprune", "nvlink",
                 "fatbinary")


@register
class CudaCollector(Collector):
    id = "cuda"
    version = "2"
    phase = 2
    paths = (
        PathSpec("/usr/local/cuda*/version.json", max_size=1024 * 1024),
        PathSpec("/usr/local/cuda*/version.txt", max_size=64 * 1024),
        PathSpec("/usr/local/cuda*/bin/nvcc", max_size=0),
        *(PathSpec(f"/usr/local/cuda*/bin/{t}", max_size=0) for t in CHECKED_TOOLS),
        *(PathSpec("/**/" + g, max_size=0) for g in _SONAME_GLOBS),
        *(PathSpec("/**/include/**/" + h, max_size=_HEADER_MAX) for h in _HEADER_NAMES),
        *(PathSpec(f"/**/{d}.dist-info/METADATA", max_size=_META_MAX) for d in _WHEEL_DISTS),
        *(PathSpec(f"/**/{d}.dist-info/RECORD", max_size=_META_MAX) for d in _WHEEL_DISTS),
        PathSpec("/**/conda-meta/*.json", max_size=64 * 1024 * 1024),
        *classifier_paths(_CLASSIFIED),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        obs = Observations("cuda")
        obs.cpe_products[TOOLKIT] = "cuda_toolkit"
        self._bin_tools: dict[str, list[str]] = {}
        self._sonames(ctx, obs)
        self._classified(ctx, obs)
        self._headers(ctx, obs)
        self._wheels(ctx, obs)
        self._conda(ctx, obs)
        roots = self._toolkit_roots(ctx, obs)
        self._env(ctx, obs, roots)
        self._cublas_pair(obs)
        for o in obs.items():
            v = obs.chosen_version(o)
            if o.name == TOOLKIT and v:
                o.properties["release"] = v
            if o.name == TOOLKIT and o.location in self._bin_tools:
                o.properties["bin-tools-checked"] = " ".join(CHECKED_TOOLS)
                o.properties["bin-tools"] = " ".join(self._bin_tools[o.location])
            # how the chosen version was read, when a classifier row gave it
            best = max(o.versions, key=lambda t: (t[0], len(t[1])), default=None)
            if best is not None and best[2].startswith("elf-"):
                method, _, conf = best[2].partition(" ")
                o.properties["version-method"] = method
                o.properties["version-confidence"] = conf.rsplit(" ", 1)[-1]
        return obs.build()

    # -- files -------------------------------------------------------------------------------

    def _sonames(self, ctx: CollectContext, obs: Observations) -> None:
        fs = ctx.fs
        # one pass over the kept shared libraries, filtered by stem (not one glob per stem)
        for path in fs.glob("/**/lib*.so.*"):
            if is_stub(path) or is_bundled(path):
                continue
            so = parse_soname(path)
            if so is None or so.suffix is None:
                continue
            stem, renamed = so.stem, renamed_stem(so.stem)
            if renamed is not None:
                stem = renamed[0]
            product = soname_product(stem)
            if product is None or not is_regular(fs, path):
                continue  # unversioned names and symlinks are not versions
            loc = install_location(path)
            detail = path.rsplit("/", 1)[1]
            ev = ctx.evidence(EvidenceMethod.SONAME.value, path, detail)
            o = obs.add(
                product, loc, ev, version=so.version, priority=_P_FILE, source="soname " + detail
            )
            if renamed is not None:
                # a vendored copy renamed by auditwheel (torch/lib, <project>.libs/)
                o.properties["vendored-as"] = detail
                o.properties["vendored-in"] = loc

    def _classified(self, ctx: CollectContext, obs: Observations) -> None:
        """Versions the binaries carry (classifier rows: getter constants, rodata strings)
        and the CUDA runtime statically linked into executables and libraries."""
        for entry in ctx.fs.entries():
            analysis = entry.analysis
            if not analysis or not any(k.startswith("classify/") for k in analysis):
                continue
            path = entry.path
            if is_stub(path) or is_bundled(path):
                continue
            for hit in classifier_hits(analysis, path, _CLASSIFIED):
                row = hit.row
                so = parse_soname(path)
                stem = so.stem if so else ""
                renamed = renamed_stem(stem)
                own = soname_product(renamed[0] if renamed else stem) == row.product
                static = not own and row.product == "cudart"
                if not own and not static and row.product not in ("nccl", "cutlass"):
                    continue
                if static or not own:
                    # linked into another binary: a component of that binary
                    loc = path
                    props = {"linkage": "static", "embedded-in": path}
                else:
                    loc, props = install_location(path), {}
                ev = ctx.evidence(hit.method, path, f"{hit.detail} ({row.confidence})")
                conf = "low" if hit.version is None else row.confidence
                o = obs.add(
                    row.product,
                    loc,
                    ev,
                    version=hit.version,
                    priority=_P_FILE,
                    source=f"{hit.method} {row.id} {conf}",
                )
                for k, v in props.items():
                    o.properties.setdefault(k, v)
                if hit.version is None:
                    o.properties.setdefault("version-confidence", "low")
                if is_executable_path(path):
                    o.properties.setdefault("embedded-in-executable", path)

    @staticmethod
    def _cublas_pair(obs: Observations) -> None:
        """cuBLAS and cuBLASLt ship together, with one release number (the nvidia-cublas
        wheels, the toolkit's libcublas-X-Y packages). ``libcublas.so.N`` carries no
        version constant of its own (its ``cublasGetVersion_v2`` calls
        ``cublasLtGetVersion``), so a cuBLAS with no version gets its cuBLASLt sibling's
        (same install location), said so; a cuBLASLt gets the version the cuBLAS package
        metadata or ``version.json`` gives for both."""
        for o in obs.items():
            if o.name != "cublas":
                continue
            lt = obs.get("cublaslt", o.location)
            if lt is None:
                continue
            v = obs.chosen_version(lt)
            if not o.versions and v:
                o.versions.append((_P_HEADER, v, "sibling libcublasLt (same release)"))
                o.properties.setdefault("version-from", "cublaslt")
                o.properties.setdefault("version-method", "sibling")
                o.properties.setdefault("version-confidence", "medium")
            for prio, v, src in list(o.versions):
                if prio >= _P_PKG:  # a package's or version.json's: it covers both libraries
                    lt.versions.append((prio, v, src))

    def _headers(self, ctx: CollectContext, obs: Observations) -> None:
        fs = ctx.fs
        for h in _HEADER_NAMES:
            for path in fs.glob("/**/include/**/" + h):
                if is_stub(path) or is_bundled(path) or not fs.is_file(path):
                    continue
                name = path.rsplit("/", 1)[1]
                try:
                    declared = premade(fs, "cuda-header", path,
                                       partial(_read_header, fs, name, path))
                except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                    ctx.unknown(f"cannot read header: {e}", path)
                    continue
                loc = install_location(path)
                for product, version in declared.items():
                    if product == TOOLKIT and not _TOOLKIT_ROOT_RX.match(loc):
                        continue  # cuda.h ships with wheels and distro packages too
                    prio = _P_FILE if product in ("cudnn", "nccl", "tensorrt") else _P_HEADER
                    ev = ctx.evidence(EvidenceMethod.HEADER.value, path, f"{name}: {version}")
                    obs.add(product, loc, ev, version=version, priority=prio, source=name)

    def _wheels(self, ctx: CollectContext, obs: Observations) -> None:
        fs = ctx.fs
        metas: set[str] = set()
        for d in _WHEEL_DISTS:
            metas.update(fs.glob(f"/**/{d}.dist-info/METADATA"))
        for meta in sorted(metas):
            dist_dir = meta.rsplit("/", 1)[0]
            try:  # parsed by a host walk's worker (the python collector's parse), or here
                dist = premade(fs, "py-metadata", meta, partial(_read_meta, fs, meta))
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read wheel metadata: {e}", meta)
                continue
            product = wheel_product(dist.name)
            if product is None:
                continue
            site = dist_dir.rsplit("/", 1)[0]
            loc, lib = self._wheel_location(ctx, dist_dir, site, product)
            ev = ctx.evidence(
                EvidenceMethod.PACKAGE_METADATA.value, meta, f"{dist.name} {dist.version}"
            )
            o = obs.add(
                product,
                loc,
                ev,
                version=dist.version,
                priority=_P_PKG,
                source=f"wheel {dist.name}",
                # named only when no package database owns the files (else fusion merges)
                pypi_package=dist.name if ctx.owner(meta) is None else "",
            )
            if lib and not any(e.path == lib for e in o.evidence):
                o.evidence.append(
                    ctx.evidence(EvidenceMethod.SONAME.value, lib, lib.rsplit("/", 1)[1])
                )

    @staticmethod
    def _wheel_location(
        ctx: CollectContext, dist_dir: str, site: str, product: str
    ) -> tuple[str, str | None]:
        """(install location, a library the wheel owns) from its RECORD."""
        fs = ctx.fs
        files: list[str] = []
        try:
            for line in fs.read_text(dist_dir + "/RECORD").splitlines():
                rel = line.split(",", 1)[0].strip()
                if rel and not rel.startswith("..") and ".dist-info/" not in rel:
                    files.append(site + "/" + rel)
        except VIEW_ERRORS as e:  # RECORD is optional: absent is normal, unreadable is not
            if fs.exists(dist_dir + "/RECORD"):
                ctx.unknown(f"cannot read RECORD: {e}", dist_dir + "/RECORD")
        libs = []
        for f in files:
            so = parse_soname(f)
            if so and soname_product(so.stem) == product:
                libs.append(f)
        for f in sorted(libs, key=lambda p: (len(p), p)):
            if fs.is_file(f):
                return install_location(f), f
        if libs:
            return install_location(libs[0]), None
        if files:
            return install_location(files[0]), None
        return site, None

    def _conda(self, ctx: CollectContext, obs: Observations) -> None:
        fs = ctx.fs
        for path in fs.glob("/**/conda-meta/*.json"):
            stem = path.rsplit("/", 1)[1][: -len(".json")]
            parts = stem.rsplit("-", 2)
            if len(parts) != 3 or parts[0] not in CONDA_PRODUCTS:
                continue
            try:
                rec = loads_json(fs.read_bytes(path))
                name, version = str(rec["name"]), str(rec["version"])
            except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
                ctx.unknown(f"cannot read conda record: {e}", path)
                continue
            product = CONDA_PRODUCTS.get(name)
            if product is None:
                continue
            prefix = path.rsplit("/conda-meta/", 1)[0] or "/"
            ev = ctx.evidence(
                EvidenceMethod.PACKAGE_METADATA.value, path, f"conda {name} {version}"
            )
            prio = _P_HEADER if name == "cuda-version" else _P_PKG
            obs.add(
                product,
                prefix,
                ev,
                version=version,
                priority=prio,
                source=f"conda {name}",
                conda_package=name,
            )

    def _toolkit_roots(self, ctx: CollectContext, obs: Observations) -> list[str]:
        fs = ctx.fs
        roots: list[str] = []
        for p in fs.glob("/usr/local/cuda*"):
            try:
                real = fs.realpath(p)
            except VIEW_ERRORS:  # a link loop is no toolkit root
                continue
            if _TOOLKIT_ROOT_RX.match(real) and fs.is_dir(real) and real not in roots:
                roots.append(real)
        roots.sort()
        out = []
        for root in roots:
            vj = self._version_json(ctx, root)
            txt = root + "/version.txt"
            nvcc = root + "/bin/nvcc"
            has_files = any(o.location == root for o in obs.items())
            if not (vj or fs.is_file(txt) or fs.is_file(nvcc) or has_files):
                continue
            out.append(root)
            present = [t for t in CHECKED_TOOLS if fs.is_file(f"{root}/bin/{t}")]
            self._bin_tools[root] = present
            if vj:
                vpath, data = vj
                rel = (
                    data.get("cuda", {}).get("version")
                    if isinstance(data.get("cuda"), dict)
                    else None
                )
                if rel:
                    obs.add(
                        TOOLKIT,
                        root,
                        ctx.evidence(EvidenceMethod.VERSION_FILE.value, vpath, f"cuda: {rel}"),
                        version=str(rel),
                        priority=_P_VJSON,
                        source="version.json",
                    )
                for key, product in VERSION_JSON_PRODUCTS.items():
                    entry = data.get(key)
                    if not isinstance(entry, dict) or not entry.get("version"):
                        continue
                    if product == "nvcc" and fs.is_file(nvcc):
                        obs.add(
                            "nvcc",
                            root,
                            ctx.evidence(EvidenceMethod.FILENAME.value, nvcc),
                            ctype=ComponentType.APPLICATION,
                        )
                    if obs.get(product, root) is not None:
                        obs.add(
                            product,
                            root,
                            ctx.evidence(
                                EvidenceMethod.VERSION_FILE.value,
                                vpath,
                                f"{key}: {entry['version']}",
                            ),
                            version=str(entry["version"]),
                            priority=_P_VJSON,
                            source="version.json",
                        )
            if fs.is_file(txt):
                try:
                    m = _VERSION_TXT_RX.search(fs.read_text(txt))
                except VIEW_ERRORS as e:
                    ctx.unknown(f"cannot read version.txt: {e}", txt)
                    m = None
                if m:
                    obs.add(
                        TOOLKIT,
                        root,
                        ctx.evidence(EvidenceMethod.VERSION_FILE.value, txt, m.group(0)),
                        version=m.group(1),
                        priority=_P_PKG,
                        source="version.txt",
                    )
            if fs.is_file(nvcc) and obs.get("nvcc", root) is None:
                obs.add(
                    "nvcc",
                    root,
                    ctx.evidence(EvidenceMethod.FILENAME.value, nvcc),
                    ctype=ComponentType.APPLICATION,
                )
            tk = obs.get(TOOLKIT, root)
            if tk is None or not tk.versions:
                # no version file: the cuda.h of the root (already added) or its directory name
                m = _TOOLKIT_ROOT_RX.match(root)
                first = next((o for o in obs.items() if o.location == root and o.evidence), None)
                if m and m.group(1) and first is not None:
                    obs.add(
                        TOOLKIT,
                        root,
                        first.evidence[0] if tk is None else None,
                        version=m.group(1),
                        priority=_P_DIR,
                        source=f"directory {root}",
                    )
        return out

    @staticmethod
    def _version_json(ctx: CollectContext, root: str) -> tuple[str, dict[str, Any]] | None:
        path = root + "/version.json"
        if not ctx.fs.is_file(path):
            return None
        try:
            data = loads_json(ctx.fs.read_bytes(path))
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read CUDA version.json: {e}", path)
            return None
        return (path, data) if isinstance(data, dict) else None

    # -- image env ---------------------------------------------------------------------------

    def _env(self, ctx: CollectContext, obs: Observations, roots: list[str]) -> None:
        env = ctx.target.env or {}
        cuda_version = env.get("CUDA_VERSION", "").strip()
        require = env.get("NVIDIA_REQUIRE_CUDA", "").strip()
        declared = [
            (var, product, env[var].strip()) for var, product in ENV_DECLARED if env.get(var)
        ]
        if not (cuda_version or require or declared or env.get("NV_CUDA_LIB_VERSION")):
            return
        # the toolkit the env describes: where /usr/local/cuda points, else the only root,
        # else the root of the same major.minor
        target: str | None = None
        try:
            link = ctx.fs.realpath("/usr/local/cuda")
        except VIEW_ERRORS:  # /usr/local/cuda loops: no root is the linked one
            link = ""
        if link in roots:
            target = link
        elif len(roots) == 1:
            target = roots[0]
        else:
            mm = major_minor(cuda_version)
            target = next((r for r in roots if mm and r.endswith("-" + mm)), None)
        loc = target or ""
        if not cuda_version and obs.get(TOOLKIT, loc) is None:
            return  # NV_* without CUDA_VERSION or a toolkit root: nothing to hang them on
        tk = obs.add(TOOLKIT, loc)
        if cuda_version:
            obs.add(
                TOOLKIT,
                loc,
                ctx.evidence(EvidenceMethod.ENV.value, None, f"CUDA_VERSION={cuda_version}"),
                version=cuda_version,
                priority=_P_ENV,
                source="env CUDA_VERSION",
            )
        for var in ("NV_CUDA_LIB_VERSION", "NVIDIA_PRODUCT_NAME"):
            if env.get(var):
                tk.evidence.append(
                    ctx.evidence(EvidenceMethod.ENV.value, None, f"{var}={env[var]}")
                )
        if require:
            rq = parse_require_cuda(require)
            tk.evidence.append(
                ctx.evidence(EvidenceMethod.ENV.value, None, f"NVIDIA_REQUIRE_CUDA={require}")
            )
            if rq.cuda:
                tk.properties["require-cuda"] = rq.cuda
            if rq.branches:
                tk.properties["driver-branches"] = rq.branches_text
        notes: list[str] = []
        decl_text: list[str] = []
        done: set[str] = set()
        for var, product, value in declared:
            if product in done:
                continue
            done.add(product)
            tk.evidence.append(ctx.evidence(EvidenceMethod.ENV.value, None, f"{var}={value}"))
            want = _declared_version(var, value)
            decl_text.append(f"{product} {want}")
            found = [v for o in obs.items() if o.name == product if (v := obs.chosen_version(o))]
            if found and not any(
                f == want or f.startswith(want + ".") or want.startswith(f + ".") for f in found
            ):
                notes.append(f"{var}={value} but {product} " + " + ".join(sorted(set(found))))
        if decl_text:
            tk.properties["env-declared"] = ", ".join(decl_text)
        if cuda_version:
            mm = major_minor(cuda_version)
            cudarts = [o for o in obs.items() if o.name == "cudart" and obs.chosen_version(o)]
            here = [o for o in cudarts if o.location == loc and loc]
            system = [o for o in cudarts if "-packages/" not in o.location]
            pool = here or system or cudarts
            versions = sorted({obs.chosen_version(o) or "" for o in pool})
            if pool and mm and not any(major_minor(v) == mm for v in versions):
                notes.insert(0, f"CUDA_VERSION={cuda_version} but cudart " + " + ".join(versions))
        if notes:
            tk.properties["disagreement"] = "; ".join(notes)
