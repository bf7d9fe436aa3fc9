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
_TF_DISTS = frozenset(
    {
        "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-rocm", "tensorflow-intel",
        "tensorflow-macos", "tensorflow-cpu-aws", "intel-tensorflow", "tf-nightly",
        "tf-nightly-cpu", "tf-nightly-gpu",
    }
)  # fmt: skip
_ORT_DISTS = frozenset(
    {
        "onnxruntime", "onnxruntime-gpu", "onnxruntime-rocm", "onnxruntime-migraphx",
        "onnxruntime-openvino", "onnxruntime-directml", "onnxruntime-training",
        "onnxruntime-qnn", "ort-nightly", "ort-nightly-gpu",
    }
)  # fmt: skip
_JAX_RX = re.compile(r"^jax-(cuda|rocm)(\d+)-(plugin|pjrt)$")

# --------------------------------------------------------------------------- the collector

#: the stack each distribution handler reports
_CPE = {
    "torch": "linuxfoundation:pytorch",
    "tensorflow": "google:tensorflow",
    "vllm": "vllm:vllm",
}
_VENDOR = {
    "pytorch": ("pytorch", "PyTorch Foundation"),
    "tensorflow": ("google", "Google LLC"),
    "jax": ("google", "Google LLC"),
    "cupy": ("cupy", "Preferred Networks, Inc."),
    "onnxruntime": ("microsoft", "Microsoft Corporation"),
    "vllm": ("vllm", "vLLM project"),
}


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
        PathSpec("/**/torch/version.py", max_size=_SMALL),
        PathSpec("/**/tensorflow/python/platform/build_info.py", max_size=_SMALL),
        PathSpec("/**/onnxruntime/capi/build_and_package_info.py", max_size=_SMALL),
        PathSpec("/**/cupy/_version.py", max_size=_SMALL),
        PathSpec("/**/cupy/.data/_wheel.json", max_size=_SMALL),
        PathSpec("/**/jax*/version.py", max_size=_SMALL),
        PathSpec("/**/jax_plugins/*/version.py", max_size=_SMALL),
        PathSpec("/**/jax_plugins/*/__init__.py", max_size=_SMALL),
        PathSpec("/**/vllm/_version.py", max_size=_SMALL),
        *LIBRARY_PATHS,
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out: list[Component] = []
        for meta in ctx.fs.glob("/**/*.dist-info/METADATA"):
            dist_dir = posixpath.dirname(meta)
            nv = dist_info_name(dist_dir)
            if nv is None:
                continue
            handler = self._handler(nv[0])
            if handler is None:
                continue
            site = posixpath.dirname(dist_dir)
            try:
                found = handler(ctx, site, nv[0], nv[1], meta)
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
        handlers: tuple[tuple[str, str, Callable[..., _Found | None]], ...] = (
            ("torch/version.py", "torch", self._torch),
            ("cupy/_version.py", "cupy", self._cupy),
        )
        for module, dist, handler in handlers:
            for path in ctx.fs.glob("/**/" + module):
                pkg_dir = posixpath.dirname(path)
                site = posixpath.dirname(pkg_dir)
                if pkg_dir in have or not ctx.fs.is_file(path):
                    continue
                try:
                    f = handler(ctx, site, dist, None, path)
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

    def _handler(self, dist: str) -> Callable[..., _Found | None] | None:
        """The reader of a distribution (canonical PyPI name) the catalog names as one of
        the frameworks (``catalog/packages.yaml``: torch, jaxlib and jax plugins, cupy
        builds, tensorflow builds, onnxruntime builds, vllm); None for any other."""
        hit = packages.product_of("pypi", dist)
        if hit is None:
            return None
        return {"pytorch": self._torch, "jax": self._jax, "cupy": self._cupy,
                "tensorflow": self._tensorflow, "onnxruntime": self._onnxruntime,
                "vllm": self._vllm}.get(hit[0])

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

    def _torch(self, ctx: CollectContext, site: str, dist: str, ver: str, meta: str) -> _Found:
        path = f"{site}/torch/version.py"
        text = self._read(ctx, path)
        f = _Found("torch", "pytorch", ver)
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/torch"
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

    def _jax(self, ctx: CollectContext, site: str, dist: str, ver: str, meta: str) -> _Found:
        f = _Found(dist, "jax", ver)
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

    def _cupy(self, ctx: CollectContext, site: str, dist: str, ver: str, meta: str) -> _Found:
        f = _Found("cupy", "cupy", ver)
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/cupy"
        f.props["cupy:distribution"] = dist
        if m := _CUPY_CUDA_RX.match(dist):
            major, minor = m.groups()
            f.props["built-for"] = f"cuda {major}" if minor == "x" else f"cuda {major}.{minor}"
        elif m := _CUPY_ROCM_RX.match(dist):
            f.props["built-for"] = f"rocm {m.group(1)}.{m.group(2)}"
        vfile = f"{site}/cupy/_version.py"
        text = self._read(ctx, vfile)
        v = py_string_assign(text, "__version__") if text else None
        if v:
            f.version = v
            f.evidence.append(
                ctx.evidence(EvidenceMethod.VERSION_FILE.value, vfile, f"__version__ = {v!r}")
            )
        wj = f"{site}/cupy/.data/_wheel.json"
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
                for k in ("cudnn", "nccl", "cutensor"):
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
        self, ctx: CollectContext, site: str, dist: str, ver: str, meta: str
    ) -> _Found | None:
        f = _Found("tensorflow", "tensorflow", ver)
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/tensorflow"
        f.props["tensorflow:distribution"] = dist
        path = f"{site}/tensorflow/python/platform/build_info.py"
        text = self._read(ctx, path)
        if text is None and dist not in _TF_DISTS:
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
        self, ctx: CollectContext, site: str, dist: str, ver: str, meta: str
    ) -> _Found | None:
        f = _Found("onnxruntime", "onnxruntime", ver)
        capi = f"{site}/onnxruntime/capi"
        f.props["location"] = site
        f.props["package-dir"] = f"{site}/onnxruntime"
        path = capi + "/build_and_package_info.py"
        text = self._read(ctx, path)
        if text is None and dist not in _ORT_DISTS:
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
        elif "cuda" in providers or "tensorrt" in providers:
            bf = "cuda"
        elif "rocm" in providers or "migraphx" in providers:
            bf = "rocm"
        elif "openvino" in providers:
            bf = "openvino"
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

    def _vllm(self, ctx: CollectContext, site: str, dist: str, ver: str, meta: str) -> _Found:
        f = _Found("vllm", "vllm", ver)
        pkg = f"{site}/vllm"
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
        if text_meta:
            for line in text_meta.splitlines():
                if line.lower().startswith("requires-dist:"):
                    req = line.split(":", 1)[1].strip()
                    if re.match(r"^torch\s*(?:[=<>!~;(\[]|$)", req) and "extra" not in req:
                        f.props["vllm:requires-torch"] = req
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
