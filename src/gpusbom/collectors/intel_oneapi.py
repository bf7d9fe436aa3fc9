"""intel-oneapi: Intel oneAPI components, by install layout and by PyPI wheel.

Stack ``oneapi``. Three sources:

- Component layout (all releases): ``/opt/intel/oneapi/<component>/<version>/`` with a
  ``latest`` link per component (``/opt/intel/oneapi/mkl/2024.0``,
  ``/opt/intel/oneapi/compiler/latest -> 2024.0``). One component per version
  directory; the evidence is its ``env/vars.sh`` when present (a file the installer's
  package owns), else the directory. ``latest`` marks the version it points to.
- Unified layout (2024.0 and later): ``/opt/intel/oneapi/<toolkit-version>/`` holding
  ``oneapi-vars.sh`` and ``bin``/``lib``/``include``. That names the toolkit release:
  product ``oneapi`` with ``release``.
- Wheels (``intel-sycl-rt``, ``dpcpp-cpp-rt``, ``intel-cmplr-lib-rt``, ``mkl``,
  ``onednn``, ``intel-opencl-rt``, ``impi-rt``, ``tbb``, ``intel-openmp`` ...): an
  observation on the wheel's ``METADATA`` file, which the Python cataloger's component
  owns (through ``RECORD``), so fusion tags that component with the oneAPI product.

The root, the component directories and the wheel names are the catalog's (the rows'
``install_dirs``, the toolkit row's ``install_root``, ``release_product`` and
``component_dirs``; ``packages.yaml``); the libraries whose release the binaries name are
the classifier rows of the stack.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from .._pep503 import canonicalize_name
from ..catalog import detection, packages
from ..errors import UnsafeArchiveError
from ..fsview.spec import PathSpec
from ..fsview.types import EntryKind
from ..model import Component, ComponentType, EvidenceMethod
from . import register
from ._amd_intel import INTEL, observation
from ._classify import hits as classifier_hits
from ._classify import paths_for as classifier_paths
from .base import CollectContext, Collector
from .python import parse_core_metadata
from .strategies.classified import products as classifier_products

__all__ = ["COMPONENT_DIRS", "ONEAPI_WHEELS", "IntelOneApiCollector"]

STACK = "oneapi"


def _layout() -> tuple[str, str, dict[str, str]]:
    """(install root, the unified layout's product, component directory -> product): the
    stack's row with ``install_root`` and the rows' ``install_dirs`` (``products.yaml``)."""
    top = detection.row_with(STACK, "install_root")
    root = detection.str_field(top, "install_root") if top else None
    release = detection.str_field(top, "release_product") if top else None
    if top is None or not root or not release:  # a packaging bug: tests load the catalog
        raise RuntimeError(f"catalog: no row of stack {STACK} names its install root")
    dirs: dict[str, str] = {}
    for d, row in detection.row_map(STACK, "install_dirs").items():
        own = [c.rpartition("/")[2] for c in row.collector]
        dirs[d] = d if d in own else row.found_as[1]
    for d, product in detection.str_map(top, "component_dirs").items():
        dirs.setdefault(d, product)
    return root, release, dirs


#: the install root; the unified layout's product (the toolkit release); component
#: directory -> product (directories not listed use ``oneapi-<dir>``)
ROOT, RELEASE_PRODUCT, COMPONENT_DIRS = _layout()
#: the products classifier rows read from this stack's binaries (``libsycl.so``)
BINARY_PRODUCTS = classifier_products(STACK)
#: top-level entries that are not components
_NOT_COMPONENTS = {
    "etc",
    "licensing",
    "logs",
    "installer",
    "conda_channel",
    "support",
    "setvars.sh",
}

#: canonical PyPI name -> product id (catalog/packages.yaml)
ONEAPI_WHEELS = packages.names_of("oneapi", "pypi")

_VERSION_DIR = re.compile(r"^\d+\.\d+(?:\.\d+)*$")
_TOOLKIT_DIR = re.compile(r"^20\d\d\.\d+(?:\.\d+)*$")


def _dist_info_globs() -> list[str]:
    # dist-info directory names use the normalised project name with "_" (PEP 427)
    names = sorted({n.replace("-", "_") for n in ONEAPI_WHEELS})
    return [f"/**/{n}-*.dist-info/METADATA" for n in names]


@register
class IntelOneApiCollector(Collector):
    id = "intel-oneapi"
    version = "2"
    paths = (
        PathSpec(f"{ROOT}/*/*/env/vars.sh", max_size=0),
        PathSpec(f"{ROOT}/*/oneapi-vars.sh", max_size=0),
        PathSpec(f"{ROOT}/setvars.sh", max_size=0),
        *(PathSpec(g, max_size=16 * 1024 * 1024) for g in _dist_info_globs()),
        *classifier_paths(BINARY_PRODUCTS),
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        out: list[Component] = []
        if ctx.fs.is_dir(ROOT):
            out += self._layouts(ctx)
        out += self._wheels(ctx)
        out += self._binaries(ctx)
        return out

    def _binaries(self, ctx: CollectContext) -> list[Component]:
        """Runtime libraries that name their own release (``libsycl.so``: the compiler
        ident of its build), e.g. a PyPI runtime wheel unpacked without its dist-info; when
        a wheel's RECORD owns the file, fusion merges this into that package."""
        out: list[Component] = []
        for entry in ctx.fs.entries():
            an = entry.analysis
            if not an or not any(k.startswith("classify/") for k in an):
                continue
            for hit in classifier_hits(an, entry.path, BINARY_PRODUCTS):
                if not hit.version:
                    continue
                props = {
                    "version-method": hit.method,
                    "version-confidence": hit.row.confidence,
                    "library": entry.path,
                }
                if ctx.owner(entry.path) is None:
                    props["metadata-missing"] = "true"
                out.append(
                    observation(
                        ctx,
                        product=hit.row.product,
                        version=hit.version,
                        vendor=INTEL,
                        stack=STACK,
                        location=posixpath.dirname(entry.path),
                        evidence=[
                            ctx.evidence(
                                hit.method, entry.path, f"{hit.detail} ({hit.row.confidence})"
                            )
                        ],
                        properties=props,
                    )
                )
        return out

    # -- /opt/intel/oneapi ------------------------------------------------------------------

    def _layouts(self, ctx: CollectContext) -> list[Component]:
        fs = ctx.fs
        out: list[Component] = []
        for top in fs.listdir(ROOT):
            path = f"{ROOT}/{top}"
            if top in _NOT_COMPONENTS or not fs.is_dir(path):
                continue
            if _TOOLKIT_DIR.match(top):
                comp = self._unified(ctx, path, top)
            else:
                out += self._component_versions(ctx, path, top)
                continue
            if comp is not None:
                out.append(comp)
        return out

    def _unified(self, ctx: CollectContext, path: str, release: str) -> Component | None:
        fs = ctx.fs
        marker = f"{path}/oneapi-vars.sh"
        if fs.exists(marker):
            ev = ctx.evidence(
                EvidenceMethod.FILENAME.value, marker, f"unified oneAPI {release} layout"
            )
        elif all(fs.is_dir(f"{path}/{d}") for d in ("bin", "lib", "include")):
            ev = ctx.evidence(
                EvidenceMethod.FILENAME.value,
                path,
                f"unified oneAPI {release} layout (bin, lib, include)",
            )
        else:
            return None
        props = {"release": release, "layout": "unified"}
        latest = self._latest(ctx, ROOT)
        if latest == path:
            props["latest"] = "true"
        return observation(
            ctx,
            product=RELEASE_PRODUCT,
            version=release,
            vendor=INTEL,
            stack=STACK,
            location=path,
            evidence=[ev],
            properties=props,
            type=ComponentType.FRAMEWORK,
        )

    @staticmethod
    def _latest(ctx: CollectContext, parent: str) -> str | None:
        link = f"{parent}/latest"
        try:
            e = ctx.fs.lookup(link, follow=False)
            if e is None or e.kind is not EntryKind.SYMLINK:
                return None
            return ctx.fs.realpath(link)
        except UnsafeArchiveError:
            return None

    def _component_versions(self, ctx: CollectContext, path: str, name: str) -> list[Component]:
        fs = ctx.fs
        product = COMPONENT_DIRS.get(name, f"oneapi-{name}")
        latest = self._latest(ctx, path)
        out: list[Component] = []
        for ver in fs.listdir(path):
            vdir = f"{path}/{ver}"
            if not _VERSION_DIR.match(ver):
                continue
            try:
                if fs.lookup(vdir, follow=False) is None or not fs.is_dir(vdir):
                    continue
                if fs.lookup(vdir, follow=False).kind is EntryKind.SYMLINK:  # type: ignore[union-attr]
                    continue  # an alias (2024 -> 2024.0): the target is reported itself
            except UnsafeArchiveError:
                continue
            vars_sh = f"{vdir}/env/vars.sh"
            where = vars_sh if fs.exists(vars_sh) else vdir
            ev = ctx.evidence(
                EvidenceMethod.FILENAME.value, where, f"oneAPI component directory {name}/{ver}"
            )
            props = {"layout": "component"}
            if latest == vdir:
                props["latest"] = "true"
            out.append(
                observation(
                    ctx,
                    product=product,
                    version=ver,
                    vendor=INTEL,
                    stack=STACK,
                    location=vdir,
                    evidence=[ev],
                    properties=props,
                )
            )
        return out

    # -- wheels -------------------------------------------------------------------------------

    def _wheels(self, ctx: CollectContext) -> list[Component]:
        fs = ctx.fs
        out: list[Component] = []
        seen: set[str] = set()
        for pattern in _dist_info_globs():
            for meta in fs.glob(pattern):
                if meta in seen:
                    continue
                seen.add(meta)
                dist_dir = posixpath.dirname(meta)
                project = posixpath.basename(dist_dir).removesuffix(".dist-info").rsplit("-", 1)[0]
                product = ONEAPI_WHEELS.get(str(canonicalize_name(project)))
                if product is None:
                    continue
                try:
                    dist = parse_core_metadata(fs.read_text(meta))
                except (OSError, LookupError, ValueError) as e:
                    ctx.unknown(f"cannot read oneAPI wheel metadata: {e}", meta)
                    continue
                if ONEAPI_WHEELS.get(str(canonicalize_name(dist.name))) != product:
                    continue
                ev = ctx.evidence(
                    EvidenceMethod.PACKAGE_METADATA.value,
                    meta,
                    f"PyPI {dist.name} {dist.version}",
                )
                out.append(
                    observation(
                        ctx,
                        product=product,
                        version=dist.version,
                        vendor=INTEL,
                        stack=STACK,
                        location=posixpath.dirname(dist_dir),
                        evidence=[ev],
                        properties={"install": "wheel"},
                    )
                )
        return out
