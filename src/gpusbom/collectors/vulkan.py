"""vulkan: Vulkan ICDs (driver manifests) and the Vulkan loader.

A Vulkan driver registers a JSON manifest in an ``icd.d`` directory::

    {"file_format_version": "1.0.0",
     "ICD": {"library_path": "/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so",
             "api_version": "1.1.230"}}

``library_path`` is absolute, relative to the manifest (when it holds a ``/``),
or a bare file name the dynamic linker finds. Manifest directories:
``/usr/share/vulkan/icd.d``, ``/etc/vulkan/icd.d``, ``/usr/local/share/vulkan/icd.d``,
``/etc/xdg/vulkan/icd.d``, ``/usr/local/nvidia/share/vulkan/icd.d`` (the NVIDIA
container toolkit's mount point) and the image env ``VK_DRIVER_FILES`` /
``VK_ICD_FILENAMES`` (replace) and ``VK_ADD_DRIVER_FILES`` (add).

The loader and the known drivers are the catalog's loader row (``vulkan-loader``:
``loader``, ``icd_products``, ``icd_drivers``). Each driver is one component named after
its product (``mesa`` for Mesa's
lavapipe / RADV / ANV / ..., ``nvidia-vulkan``, ``amdvlk``, ...; the driver itself
in ``vulkan:driver``) with its version from, in order: the version string the
library carries (Mesa: ``Mesa 22.3.6``), the NVIDIA file-name version
(``libGLX_nvidia.so.580.95.05``), the owning package; the manifest's
``api_version`` is ``vulkan:api-version``. The loader ``libvulkan.so.1`` is
``vulkan-loader`` with its file-name version (``libvulkan.so.1.3.239``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator

from ..fsview.spec import PathSpec
from ..model import Component, ComponentType, EvidenceMethod
from ..safetext import loads_json
from . import register
from ._libs import (
    LIBRARY_PATHS,
    driver_for,
    find_library,
    generic_purl,
    icd_component,
    icd_row,
    library_dirs,
    package_label,
    package_version,
    soname_version,
)
from ._libs import IcdDriver as _Driver
from .base import CollectContext, Collector

__all__ = ["ICD_DIRS", "VulkanCollector", "parse_manifest"]

ICD_DIRS = (
    "/usr/share/vulkan/icd.d",
    "/etc/vulkan/icd.d",
    "/usr/local/share/vulkan/icd.d",
    "/etc/xdg/vulkan/icd.d",
    "/usr/local/nvidia/share/vulkan/icd.d",
)
_MANIFEST_MAX = 1024 * 1024
_LIB_CONTENT = 128 * 1024 * 1024
COLLECTOR_ID = "vulkan"
#: the loader's row (``vulkan-loader``): its file, identity and the drivers by library stem
_ROW = icd_row(COLLECTOR_ID)
_DRIVERS: dict[str, _Driver] = _ROW.drivers


def _driver_for(lib: str) -> _Driver:
    return driver_for(_DRIVERS, lib, _ROW.fallback)


def parse_manifest(text: str) -> tuple[str, str | None, str | None]:
    """(library_path, api_version, file_format_version) of an ICD manifest; ValueError when it
    is not one."""
    doc = loads_json(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("ICD"), dict):
        raise ValueError("no ICD object")  # noqa: TRY004 - callers catch ValueError
    icd = doc["ICD"]
    lib = icd.get("library_path")
    if not isinstance(lib, str) or not lib.strip():
        raise ValueError("ICD has no library_path")
    api = icd.get("api_version")
    ffv = doc.get("file_format_version")
    return lib.strip(), str(api) if api is not None else None, str(ffv) if ffv is not None else None


@register
class VulkanCollector(Collector):
    id = COLLECTOR_ID
    version = "1"
    paths = (
        *(PathSpec(d + "/*.json", max_size=_MANIFEST_MAX) for d in ICD_DIRS),
        # manifests the image env may name elsewhere (VK_DRIVER_FILES=/opt/x/nvidia_icd.json)
        PathSpec("/**/icd.d/*.json", max_size=_MANIFEST_MAX),
        PathSpec("/**/*icd*.json", max_size=_MANIFEST_MAX),
        PathSpec("/**/vulkan/**/*.json", max_size=_MANIFEST_MAX),
        PathSpec("/**/libvulkan_*.so*", max_size=_LIB_CONTENT),
        *LIBRARY_PATHS,
    )

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        env = ctx.target.env
        dirs = library_dirs(ctx)
        manifests: list[tuple[str, str | None]] = []  # (path, env override)
        replace = None
        for var in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES"):
            if (env.get(var) or "").strip():
                replace = f"{var}={env[var].strip()}"
                manifests += [(p, replace) for p in self._env_manifests(ctx, env[var])]
                break
        add = (env.get("VK_ADD_DRIVER_FILES") or "").strip()
        if add:
            manifests += [(p, f"VK_ADD_DRIVER_FILES={add}") for p in self._env_manifests(ctx, add)]
        for d in ICD_DIRS:
            for p in ctx.fs.glob(d + "/*.json"):
                manifests.append((p, None))
        out: list[Component] = []
        seen: set[str] = set()
        for path, override in manifests:
            real = ctx.fs.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            comp = self._from_manifest(ctx, path, dirs, override, replace)
            if comp is not None:
                out.append(comp)
        out.extend(self._loaders(ctx, dirs))
        return out

    @staticmethod
    def _env_manifests(ctx: CollectContext, value: str) -> list[str]:
        out: list[str] = []
        for item in (x.strip() for x in value.split(":")):
            if not item.startswith("/"):
                continue
            if ctx.fs.is_dir(item):
                out.extend(ctx.fs.glob(item.rstrip("/") + "/*.json"))
            elif ctx.fs.exists(item):
                out.append(item)
            else:
                ctx.unknown(
                    "Vulkan driver manifest named in the image env is absent (or its name does "
                    "not look like a manifest: not captured)",
                    item,
                )
        return out

    def _from_manifest(
        self,
        ctx: CollectContext,
        path: str,
        dirs: list[str],
        override: str | None,
        replace: str | None,
    ) -> Component | None:
        try:
            lib, api, ffv = parse_manifest(ctx.fs.read_text(path))
        except Exception as e:  # noqa: BLE001 - a bad file is an unknown naming it
            ctx.unknown(f"cannot read Vulkan ICD manifest: {e}", path)
            return None
        drv = _driver_for(lib)
        props = {
            "stack": _ROW.stack,
            "product": drv.product,
            "vulkan:driver": drv.driver or drv.product,
            "icd": path,
            "icd-library": lib,
        }
        if api:
            props["vulkan:api-version"] = api
        if ffv:
            props["vulkan:file-format-version"] = ffv
        if override:
            props["icd-source"] = override.split("=", 1)[0]
        elif replace:
            props["overridden-by"] = replace
        icd_owner = ctx.owner(path)
        if icd_owner is not None:
            props["icd-package"] = package_label(icd_owner) or ""
        evidence = [
            ctx.evidence(
                EvidenceMethod.VERSION_FILE.value,
                path,
                f"library_path={lib}" + (f", api_version={api}" if api else ""),
            )
        ]
        if override:
            evidence.append(ctx.evidence(EvidenceMethod.ENV.value, None, override))
        found = find_library(ctx, lib, dirs, posixpath.dirname(path))
        return icd_component(ctx, drv, found, props, evidence, icd_owner, "manifest", _LIB_CONTENT)

    @staticmethod
    def _loaders(ctx: CollectContext, dirs: list[str]) -> Iterator[Component]:
        seen: set[str] = set()
        for d in dirs:
            path = posixpath.join(d, _ROW.file)
            if not ctx.fs.is_file(path):
                continue
            real = ctx.fs.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            version = soname_version(real)
            if version is not None and version.count(".") < 2:
                version = None  # libvulkan.so.1 itself: no release in the name
            props = {
                "stack": _ROW.stack,
                "product": _ROW.product,
                "location": posixpath.dirname(real),
                "library": real,
            }
            owner = ctx.owner(real)
            if owner is not None:
                props["library-package"] = package_label(owner) or ""
                if version is None:
                    version = package_version(owner)
            yield Component(
                name=_ROW.product,
                version=version,
                type=ComponentType.LIBRARY,
                purl=generic_purl(_ROW.namespace, _ROW.product, version),
                supplier=_ROW.supplier,
                properties=props,
                evidence=[
                    ctx.evidence(EvidenceMethod.SONAME.value, real, posixpath.basename(real))
                ],
                ecosystem="generic",
            )
