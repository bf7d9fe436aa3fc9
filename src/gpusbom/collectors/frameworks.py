"""frameworks: GPU builds of ML frameworks installed from wheels, and what they were built for.

Each framework install (found by its ``.dist-info``) is one component with
``built-for`` naming the GPU stack and version its binaries target (``cuda 13.0``,
``rocm 6.2``, ``xpu``, ``cpu``) and ``stack`` naming the framework:

* ``pytorch``: ``torch/version.py`` (``__version__``, ``cuda``, ``hip``, ``rocm``,
  ``xpu``, ``git_version``, ``debug``; the field set grows by release);
* ``jax``: ``jaxlib`` (CPU) and the GPU plugins ``jax-cuda12-plugin``,
  ``jax-cuda13-plugin``, ``jax-cuda12-pjrt`` (``jax_plugins/xla_cuda12``), the
  ROCm equivalents; CUDA / ROCm major from the distribution name, version from
  ``version.py`` (``_version``) when present;
* ``cupy``: ``cupy-cudaXX`` (``cupy-cuda12x`` -> ``cuda 12``, ``cupy-cuda102`` ->
  ``cuda 10.2``), ``cupy-rocm-X-Y``; version from ``cupy/_version.py``, wheel build
  details from ``cupy/.data/_wheel.json`` when present;
* ``tensorflow``: ``tensorflow/python/platform/build_info.py`` (``is_cuda_build``,
  ``is_rocm_build``, ``cuda_version``, ``cudnn_version``, ...);
* ``onnxruntime``: ``onnxruntime/capi/build_and_package_info.py`` (``package_name``,
  ``__version__``, ``cuda_version``, ``cudnn_version``, ...) and the execution
  provider libraries in ``onnxruntime/capi``;
* ``vllm``: ``vllm/_version.py`` and the ``torch`` requirement of its metadata; the
  target from the version's local tag (``+cu129``) or the extension modules it ships.

Which distributions are which framework, and each framework's identity (purl namespace,
supplier, CPE), package directory and reader facts, are the catalog's package entries
(``catalog/packages.yaml``, ``detect``); the readers are keyed by the entry's ``reader``.

Python files are parsed (``ast``) or matched with regular expressions, never
imported or run. Evidence sits on files the wheel owns, so fusion merges each
observation into the wheel's ``pkg:pypi`` component.

One module over 500 lines: one collector class; each framework's reader is a short method
of it sharing the ``_Found`` record, the distribution walk and the ``built-for`` rules.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable

from .. import catalog
from ..catalog import packages
from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, Evidence, EvidenceMethod
from ..safetext import loads_json
from . import register
from ._framework_files import _major_minor, module_constants, tensorflow_build_info, torch_built_for
from ._libs import LIBRARY_PATHS, generic_purl
from .base import VIEW_ERRORS, CollectContext, Collector
from .triton import dist_info_name, py_string_assign

__all__ = [
    "FrameworksCollector",
    "module_constants",
    "tensorflow_build_info",
    "torch_built_for",
]

_SMALL = 1024 * 1024
_LOCAL_ROCM_RX = re.compile(r"\+rocm(\d+)\.?(\d+)?")
_CUPY_CUDA_RX = re.compile(r"^cupy-cuda(\d+)(x|\d)$")
_CUPY_ROCM_RX = re.compile(r"^cupy-rocm-(\d+)-(\d+)$")
_JAX_RX = re.compile(r"^jax-(cuda|rocm)(\d+)-(plugin|pjrt)$")

# --------------------------------------------------------------------------- the collector

def _framework_entries() -> tuple[packages.PackageProduct, ...]:
    """The package entries this collector reads (``catalog/packages.yaml``: ``detect`` with
    a ``reader``), in file order."""
    return tuple(e for e in packages.entries() if e.detect.get("reader"))


def _detect_str(e: packages.PackageProduct, key: str) -> str | None:
    v = e.detect.get(key)
    if v is not None and not isinstance(v, str):
        raise catalog.CatalogError(f"packages.yaml: {e.stack} {e.product}: detect {key} "
                                   "must be a string")
    return v


def _detect_strs(e: packages.PackageProduct, key: str) -> tuple[str, ...]:
    v = e.detect.get(key) or []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise catalog.CatalogError(f"packages.yaml: {e.stack} {e.product}: detect {key} "
                                   "must be a list of strings")
    return tuple(v)


class _Fw:
    """One framework's ``detect`` entry, checked: the stack and product it reports, the
    component's identity and what its reader needs."""

    def __init__(self, e: packages.PackageProduct) -> None:
        self.stack = e.stack
        self.product = e.product
        self.reader = _detect_str(e, "reader") or ""
        self.namespace = _detect_str(e, "namespace")
        self.supplier = _detect_str(e, "supplier")
        self.cpe = _detect_str(e, "cpe")
        self.package = _detect_str(e, "package") or ""
        self.version_module = _detect_str(e, "version_module")
        self.requires = _detect_str(e, "requires")
        self.builds = frozenset(_detect_strs(e, "builds"))
        self.preload = _detect_strs(e, "preload")
        prov = e.detect.get("providers") or {}
        if not isinstance(prov, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in prov.items()):
            raise catalog.CatalogError(f"packages.yaml: {e.stack} {e.product}: detect "
                                       "providers must map providers to stacks")
        self.providers: dict[str, str] = dict(prov)


_FRAMEWORKS: dict[tuple[str, str], _Fw] = {(e.stack, e.product): _Fw(e)
                                           for e in _framework_entries()}
#: the stack -> (purl namespace, supplier) of its components; product -> CPE vendor:product
_VENDOR = {f.stack: (f.namespace, f.supplier) for f in _FRAMEWORKS.values()}
_CPE = {f.product: f.cpe for f in _FRAMEWORKS.values() if f.cpe}


def _reader_globs() -> tuple[str, ...]:
    """The files each reader reads, under the entries' package directories (readers in a
    fixed order: the path specs' order does not follow the table's)."""
    by_reader = {f.reader: f for f in _FRAMEWORKS.values()}
    files: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("torch-version", ("{module}",)),
        ("tf-build-info", ("{package}/python/platform/build_info.py",)),
        ("ort-build-info", ("{package}/capi/build_and_package_info.py",)),
        ("cupy-wheel", ("{module}", "{package}/.data/_wheel.json")),
        ("jax-plugin", ("jax*/version.py", "jax_plugins/*/version.py",
                        "jax_plugins/*/__init__.py")),
        ("vllm-version", ("{package}/_version.py",)),
    )
    out: list[str] = []
    for reader, globs in files:
        fw = by_reader.get(reader)
        if fw is not None:
            out += ["/**/" + g.format(module=fw.version_module, package=fw.package)
                    for g in globs]
    return tuple(out)


class _Found:
    """What one handler saw: the component fields it fills in."""

    def __init__(self, name: str, stack: str, version: str | None) -> None:
        self.name = name
        self.stack = stack
        self.version = version
        self.props: dict[str, str] = {}
        self.evidence: list[Evidence] = []


@register
class FrameworksCollector(Collector):
    id = "frameworks"
    version = "1"
    paths = (
        PathSpec("/**/*.dist-info/METADATA", max_size=16 * 1024 * 1024),
        *(PathSpec(g, max_size=_SMALL) for g in _reader_globs()),
        *LIBRARY_PATHS,
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out: list[Component] = []
        for meta in ctx.fs.glob("/**/*.dist-info/METADATA"):
            dist_dir = posixpath.dirname(meta)
            nv = dist_info_name(dist_dir)
            if nv is None:
                continue
            hit = self._handler(nv[0])
            if hit is None:
                continue
            handler, fw = hit
            site = posixpath.dirname(dist_dir)
            try:
                found = handler(ctx, fw, site, nv[0], nv[1], meta)
            except Exception as e:  # noqa: BLE001 - one broken install must not hide others
                ctx.unknown(f"cannot read {nv[0]} build details: {type(e).__name__}: {e}", meta)
                continue
            if found is not None:
                out.append(self._component(found))
        out.extend(self._without_metadata(ctx, out))
        return out

    def _without_metadata(self, ctx: CollectContext, found: list[Component]) -> list[Component]:
        """Frameworks whose dist-info is gone (deleted, or copied without it), recognised by
        their own version modules: ``torch/version.py``, ``cupy/_version.py``. Reported with
        ``metadata-missing`` and a lower ``version-confidence`` (a version module can be
        edited; the wheel's RECORD cannot vouch for it)."""
        have = {c.properties.get("package-dir") or "" for c in found}
        have |= {(c.properties.get("location") or "") + "/" + c.name for c in found}
        out: list[Component] = []
        readers = self._readers()
        # the frameworks whose entry names a version module (the distribution: the product)
        handlers = tuple((fw.version_module, fw.product, readers[fw.reader], fw)
                         for fw in _FRAMEWORKS.values()
                         if fw.version_module and fw.reader in readers)
        for module, dist, handler, fw in handlers:
            for path in ctx.fs.glob("/**/" + module):
                pkg_dir = posixpath.dirname(path)
                site = posixpath.dirname(pkg_dir)
                if pkg_dir in have or not ctx.fs.is_file(path):
                    continue
                try:
                    f = handler(ctx, fw, site, dist, None, path)
                except Exception as e:  # noqa: BLE001 - one broken install must not hide others
                    ctx.unknown(f"cannot read {module}: {type(e).__name__}: {e}", path)
                    continue
                if f is None or not f.version:
                    continue
                f.props["metadata-missing"] = "true"
                f.props["version-method"] = "version-module"
                f.props["version-confidence"] = "medium"
                out.append(self._component(f))
        return out

    def _readers(self) -> dict[str, Callable[..., _Found | None]]:
        """The readers, by the ``reader`` a framework's entry names (each framework writes
        its build details in files of its own)."""
        return {"torch-version": self._torch, "jax-plugin": self._jax,
                "cupy-wheel": self._cupy, "tf-build-info": self._tensorflow,
                "ort-build-info": self._onnxruntime, "vllm-version": self._vllm}

    def _handler(self, dist: str) -> tuple[Callable[..., _Found | None], _Fw] | None:
        """The reader of a distribution (canonical PyPI name) the catalog names as one of
        the frameworks (``catalog/packages.yaml``, entries with ``detect``: torch, jaxlib and
        jax plugins, cupy builds, tensorflow builds, onnxruntime builds, vllm), and the
        framework's entry; None for any other."""
        hit = packages.entry_of("pypi", dist)
        fw = _FRAMEWORKS.get((hit[0].stack, hit[0].product)) if hit else None
        reader = self._readers().get(fw.reader) if fw else None
        return (reader, fw) if reader and fw else None

    @staticmethod
    def _component(f: _Found) -> Component:
        vendor, supplier = _VENDOR.get(f.stack, (None, None))
        props = {"stack": f.stack, "product": f.name, **f.props}
        base = (f.version or "").split("+", 1)[0]
        cpe = _CPE.get(f.name)
        return Component(
            name=f.name,
            version=f.version,
            type=ComponentType.FRAMEWORK,
            purl=generic_purl(vendor, f.name, f.version),
            cpe=catalog.cpe23(cpe, base) if cpe and base else None,
            supplier=supplier,
            properties=props,
            evidence=f.evidence,
            ecosystem="generic",
        )

    @staticmethod
    def _read(ctx: CollectContext, path: str) -> str | None:
        if not ctx.fs.is_file(path):
            return None
        return ctx.fs.read_text(path)

    @staticmethod
    def _meta_evidence(ctx: CollectContext, f: _Found, meta: str, dist: str, ver: str) -> None:
        f.evidence.append(
            ctx.evidence(EvidenceMethod.PACKAGE_METADATA.value, meta, f"{dist} {ver}")
        )

    # -- torch ---------------------------------------------------------------------------------

    def _torch(self, ctx: CollectContext, fw: _Fw, site: str, dist: str, ver: str,
               meta: str) -> _Found:
        path = f"{site}/{fw.version_module}"
        text = self._read(ctx, path)
        f = _Found(fw.product, fw.stack, ver)
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/{fw.package}"
        if text is None:
            self._meta_evidence(ctx, f, meta, dist, ver)
            f.props["built-for"] = torch_built_for({}, ver)
            return f
        c = module_constants(text)
        v = c.get("__version__")
        if isinstance(v, str) and v:
            f.version = v
        for key in ("cuda", "hip", "rocm", "xpu"):
            val = c.get(key)
            if isinstance(val, str) and val:
                f.props[f"torch:{key}"] = val
        if isinstance(c.get("git_version"), str):
            f.props["git-version"] = c["git_version"]
        if isinstance(c.get("debug"), bool):
            f.props["torch:debug"] = str(c["debug"]).lower()
        f.props["built-for"] = torch_built_for(c, f.version)
        detail = ", ".join(
            f"{k}={c.get(k)!r}" for k in ("__version__", "cuda", "hip", "xpu") if k in c
        )
        f.evidence.append(ctx.evidence(EvidenceMethod.VERSION_FILE.value, path, detail))
        return f

    # -- JAX -----------------------------------------------------------------------------------

    def _jax(self, ctx: CollectContext, fw: _Fw, site: str, dist: str, ver: str,
             meta: str) -> _Found:
        f = _Found(dist, fw.stack, ver)
        m = _JAX_RX.match(dist)
        if m is None:  # jaxlib: the CPU runtime; GPUs come through plugins
            dirs = [f"{site}/jaxlib"]
            f.props["built-for"] = "cpu"
        else:
            kind, num, flavour = m.groups()
            if kind == "cuda":
                f.props["built-for"] = f"cuda {num}"
            else:
                f.props["built-for"] = (
                    f"rocm {num[0]}.{num[1:]}" if len(num) >= 2 else f"rocm {num}"
                )
            dirs = (
                [f"{site}/jax_{kind}{num}_plugin"]
                if flavour == "plugin"
                else [f"{site}/jax_plugins/xla_{kind}{num}", f"{site}/jax_plugins/xla_{kind}"]
            )
        f.props["location"] = site
        for d in dirs:
            if ctx.fs.is_dir(d):
                f.props["package-dir"] = d
                vfile = d + "/version.py"
                text = self._read(ctx, vfile)
                v = (
                    py_string_assign(text, "_version") or py_string_assign(text, "__version__")
                    if text
                    else None
                )
                if v:
                    f.version = v
                    f.evidence.append(
                        ctx.evidence(EvidenceMethod.VERSION_FILE.value, vfile, f"_version = {v!r}")
                    )
                break
        if not f.evidence:
            self._meta_evidence(ctx, f, meta, dist, ver)
        return f

    # -- CuPy ----------------------------------------------------------------------------------

    def _cupy(self, ctx: CollectContext, fw: _Fw, site: str, dist: str, ver: str,
              meta: str) -> _Found:
        f = _Found(fw.product, fw.stack, ver)
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/{fw.package}"
        f.props["cupy:distribution"] = dist
        if m := _CUPY_CUDA_RX.match(dist):
            major, minor = m.groups()
            f.props["built-for"] = f"cuda {major}" if minor == "x" else f"cuda {major}.{minor}"
        elif m := _CUPY_ROCM_RX.match(dist):
            f.props["built-for"] = f"rocm {m.group(1)}.{m.group(2)}"
        vfile = f"{site}/{fw.version_module}"
        text = self._read(ctx, vfile)
        v = py_string_assign(text, "__version__") if text else None
        if v:
            f.version = v
            f.evidence.append(
                ctx.evidence(EvidenceMethod.VERSION_FILE.value, vfile, f"__version__ = {v!r}")
            )
        wj = f"{site}/{fw.package}/.data/_wheel.json"
        text = self._read(ctx, wj)
        if text:
            try:
                doc = loads_json(text)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                cuda = doc.get("cuda")
                if isinstance(cuda, str) and cuda:
                    f.props["cupy:wheel-cuda"] = cuda
                    if "built-for" not in f.props:
                        f.props["built-for"] = f"cuda {cuda}"
                for k in fw.preload:
                    lib = doc.get(k)
                    if isinstance(lib, dict) and isinstance(lib.get("version"), str):
                        f.props[f"cupy:preload:{k}"] = lib["version"]
                f.evidence.append(
                    ctx.evidence(EvidenceMethod.VERSION_FILE.value, wj, f"cuda={cuda!r}")
                )
        f.props.setdefault("built-for", "unknown")
        if not f.evidence:
            self._meta_evidence(ctx, f, meta, dist, ver)
        return f

    # -- TensorFlow ----------------------------------------------------------------------------

    def _tensorflow(
        self, ctx: CollectContext, fw: _Fw, site: str, dist: str, ver: str, meta: str
    ) -> _Found | None:
        f = _Found(fw.product, fw.stack, ver)
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/{fw.package}"
        f.props["tensorflow:distribution"] = dist
        path = f"{site}/{fw.package}/python/platform/build_info.py"
        text = self._read(ctx, path)
        if text is None and dist not in fw.builds:
            return None  # an add-on project (tensorflow-foo), not a TensorFlow build
        self._meta_evidence(ctx, f, meta, dist, ver)  # TF writes its version nowhere simpler
        if text is None:
            f.props["built-for"] = "unknown"
            return f
        info = tensorflow_build_info(text)
        cuda, rocm = info.get("cuda_version"), info.get("rocm_version")
        if info.get("is_cuda_build"):
            f.props["built-for"] = f"cuda {cuda}" if cuda else "cuda"
        elif info.get("is_rocm_build"):
            f.props["built-for"] = f"rocm {rocm}" if rocm else "rocm"
        else:
            f.props["built-for"] = "cpu"
        for key, prop in (
            ("cuda_version", "tensorflow:cuda"),
            ("cudnn_version", "tensorflow:cudnn"),
            ("rocm_version", "tensorflow:rocm"),
        ):
            if info.get(key):
                f.props[prop] = str(info[key])
        if info.get("is_tensorrt_build"):
            f.props["tensorflow:tensorrt"] = "true"
        caps = info.get("cuda_compute_capabilities")
        if isinstance(caps, (list, tuple)) and caps:
            f.props["tensorflow:cuda-compute-capabilities"] = ", ".join(map(str, caps))
        detail = ", ".join(
            f"{k}={info[k]!r}"
            for k in ("is_cuda_build", "is_rocm_build", "cuda_version", "cudnn_version")
            if k in info
        )
        f.evidence.append(ctx.evidence(EvidenceMethod.VERSION_FILE.value, path, detail))
        return f

    # -- ONNX Runtime --------------------------------------------------------------------------

    def _onnxruntime(
        self, ctx: CollectContext, fw: _Fw, site: str, dist: str, ver: str, meta: str
    ) -> _Found | None:
        f = _Found(fw.product, fw.stack, ver)
        capi = f"{site}/{fw.package}/capi"
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/{fw.package}"
        path = capi + "/build_and_package_info.py"
        text = self._read(ctx, path)
        if text is None and dist not in fw.builds:
            return None  # an add-on project, not an ONNX Runtime build
        c = module_constants(text) if text else {}
        if isinstance(c.get("__version__"), str) and c["__version__"]:
            f.version = c["__version__"]
        if isinstance(c.get("package_name"), str):
            f.props["onnxruntime:package-name"] = c["package_name"]
        for key in ("cuda_version", "cudnn_version", "rocm_version"):
            if isinstance(c.get(key), str) and c[key]:
                f.props["onnxruntime:" + key.replace("_version", "")] = c[key]
        providers: list[str] = []
        if ctx.fs.is_dir(capi):
            for name in ctx.fs.listdir(capi):
                m = re.match(r"^libonnxruntime_providers_([a-z0-9_]+)\.so", name)
                if m and m.group(1) != "shared" and m.group(1) not in providers:
                    providers.append(m.group(1))
                    f.evidence.append(
                        ctx.evidence(
                            EvidenceMethod.FILENAME.value, f"{capi}/{name}", "execution provider"
                        )
                    )
        if providers:
            f.props["onnxruntime:providers"] = ", ".join(sorted(providers))
        if c.get("cuda_version"):
            bf = f"cuda {c['cuda_version']}"
        elif c.get("rocm_version"):
            bf = f"rocm {c['rocm_version']}"
        elif by_provider := next((t for p, t in fw.providers.items() if p in providers), None):
            bf = by_provider  # the entry's providers, in order: the first present wins
        elif dist.endswith("-gpu"):
            bf = "cuda"
        else:
            bf = "cpu"
        f.props["built-for"] = bf
        if text is not None:
            f.evidence.insert(
                0,
                ctx.evidence(
                    EvidenceMethod.VERSION_FILE.value,
                    path,
                    ", ".join(f"{k}={v!r}" for k, v in c.items()),
                ),
            )
        if not f.evidence:
            self._meta_evidence(ctx, f, meta, dist, ver)
        return f

    # -- vLLM ----------------------------------------------------------------------------------

    def _vllm(self, ctx: CollectContext, fw: _Fw, site: str, dist: str, ver: str,
              meta: str) -> _Found:
        f = _Found(fw.product, fw.stack, ver)
        pkg = f"{site}/{fw.package}"
        f.props["location"] = site
        f.props["package-dir"] = pkg
        vfile = pkg + "/_version.py"
        text = self._read(ctx, vfile)
        v = (
            py_string_assign(text, "__version__") or py_string_assign(text, "version")
            if text
            else None
        )
        if v:
            f.version = v
            f.evidence.append(
                ctx.evidence(EvidenceMethod.VERSION_FILE.value, vfile, f"__version__ = {v!r}")
            )
        try:
            text_meta = ctx.fs.read_text(meta)
        except VIEW_ERRORS:  # the python collector reports unreadable metadata (one unknown)
            text_meta = ""
        required = fw.requires  # the requirement recorded (the framework it runs on)
        if text_meta:
            for line in text_meta.splitlines():
                if line.lower().startswith("requires-dist:"):
                    req = line.split(":", 1)[1].strip()
                    if required and re.match(rf"^{re.escape(required)}\s*(?:[=<>!~;(\[]|$)",
                                             req) and "extra" not in req:
                        f.props[f"{fw.stack}:requires-{required}"] = req
                        f.evidence.append(
                            ctx.evidence(
                                EvidenceMethod.PACKAGE_METADATA.value, meta, f"Requires-Dist: {req}"
                            )
                        )
                        break
                if not line.strip():
                    break
        names = ctx.fs.listdir(pkg) if ctx.fs.is_dir(pkg) else []
        local = (f.version or "").partition("+")[2]
        if m := re.match(r"^cu(\d+)(\d)$", local):
            bf = f"cuda {m.group(1)}.{m.group(2)}"
        elif local.startswith("rocm"):
            bf = "rocm" + (f" {_major_minor(local[4:])}" if local[4:] else "")
        elif local in ("cpu", "xpu"):
            bf = local
        elif any(n.startswith("_rocm_C") for n in names):
            bf = "rocm"
        elif (
            any(n.startswith(("_moe_C", "cumem_allocator")) for n in names)
            or "vllm_flash_attn" in names
        ):
            bf = "cuda"
        elif any(n.startswith("_C.") for n in names):
            bf = "cpu"
        else:
            bf = "unknown"
        f.props["built-for"] = bf
        for n in names:
            if n.startswith(("_C.", "_rocm_C.", "_moe_C.")) and n.endswith(".so"):
                f.evidence.append(
                    ctx.evidence(EvidenceMethod.FILENAME.value, f"{pkg}/{n}", "extension module")
                )
        if not f.evidence:
            self._meta_evidence(ctx, f, meta, dist, ver)
        return f
