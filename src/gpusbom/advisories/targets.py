"""The targets an advisory's affected entries name, and how each is recognised on components.

A product target (``nvidia-driver``, ``torch``...) is a row of the product-identity catalog
(``gpusbom.catalog``); a package target is a purl without version (``pkg:pypi/vllm``).
``selectors`` turns either into the selectors the matcher tests components with.
"""

from __future__ import annotations

#: CUDA components judged as the toolkit release they ship with (``cuda_releases``)
_CUDA_RELEASE_COMPONENTS = ("cublas", "cudart", "cufft", "cupti", "curand", "cusolver",
                            "cusparse", "nvcc", "nvjitlink", "nvrtc")


def _targets() -> dict[str, list[dict[str, str]]]:
    """target id -> selectors, one target per row of the product-identity catalog
    (``gpusbom.catalog``). A selector matches a component by package (``ecosystem`` +
    ``name``), by GPU product (``stack`` [+ ``product``]) or by any name the catalog row
    lists (``catalog``: deb/rpm/wheel/conda/generic purl/CPE)."""
    from .. import catalog

    out: dict[str, list[dict[str, str]]] = {}
    for row in catalog.products():
        sels: list[dict[str, str]] = []
        for c in row.collector:
            stack, _, product = c.rpartition("/")
            stack = stack or row.stack
            sels.append({"stack": stack} if product == "*" else {"stack": stack, "product": product})
        if row.id == "cuda-toolkit":
            # the toolkit's components, translated to the release by cuda_releases.release_of
            # when no toolkit root was found beside them
            sels += [{"stack": "cuda", "product": p, "via": "cuda-release"}
                     for p in _CUDA_RELEASE_COMPONENTS]
        sels.append({"catalog": row.id})
        out[row.id] = sels
    return out


TARGETS: dict[str, list[dict[str, str]]] = _targets()

#: package ecosystems a ``pkg:<type>/...`` target may name (purl types, as ``Component.ecosystem``)
PACKAGE_TYPES = ("pypi", "deb", "rpm", "apk", "golang", "npm", "cargo", "conda", "maven", "gem")


def selectors(target: str) -> list[dict[str, str]]:
    """How a target is recognised on components.

    A product target (``nvidia-driver``, ``torch``...) maps through ``TARGETS``. A package
    target is a purl without version, as importers of OSV / CVE records write it:
    ``pkg:pypi/vllm`` (the package ``vllm`` of ecosystem ``pypi``) or
    ``pkg:deb/debian/nvidia-graphics-drivers`` (a Debian *source* package: binary packages
    are matched through their ``source-package`` property).
    """
    if target in TARGETS:
        return TARGETS[target]
    if target.startswith("pkg:"):
        parts = target[4:].split("/")
        if len(parts) >= 2 and parts[0] in PACKAGE_TYPES and parts[-1]:
            if parts[0] in ("deb", "rpm", "apk"):
                return [{"ecosystem": parts[0], "source": parts[-1]}]
            return [{"ecosystem": parts[0], "name": "/".join(parts[1:])}]
    raise KeyError(target)


def known_target(target: str) -> bool:
    try:
        selectors(target)
    except KeyError:
        return False
    return True
