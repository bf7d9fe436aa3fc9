"""What gpusbom's collectors would say about a package another tool listed.

An image scan learns that a deb ``libnvidia-compute-550`` is the NVIDIA driver by fusing
file evidence (``libcuda.so.550.127.05``) into the package; an SBOM from Syft, Trivy or
cdxgen only names the package. Here the package name (and ecosystem) gives the same
product (``Component.products``), so the advisory matcher and the stack summary treat it as
they would the scanned package. Every name comes from the catalog, the table the collectors
read too: package names (``catalog/packages.yaml``: driver, container toolkit, Intel,
Khronos and Mesa packages, CUDA metapackages, framework, Triton and oneAPI wheels), library
stems, CUDA wheel stems and CUDA conda names (``catalog/names.yaml``), and the catalog's
product rows (``catalog/products.yaml``). Only the rules that turn a distribution package
name into a library stem (``libcudnn9-cuda-12`` -> ``libcudnn``) are here.

Every classification is marked ``classified-by: package-name``: it is a claim from a
name, not from files.
"""

from __future__ import annotations

import re

from .._pep503 import canonicalize_name
from ..catalog import names, packages

#: purl type -> gpusbom ecosystem (collectors' ``Component.ecosystem``)
ECOSYSTEMS = {
    "deb": "deb", "rpm": "rpm", "apk": "apk", "pypi": "pypi", "conda": "conda",
    "golang": "golang", "npm": "npm", "maven": "maven", "cargo": "cargo", "gem": "gem",
    "nuget": "nuget", "composer": "composer", "generic": "generic", "oci": "oci",
    "docker": "docker", "github": "github", "hex": "hex", "pub": "pub", "swift": "swift",
    "cocoapods": "cocoapods", "conan": "conan", "cran": "cran", "hackage": "hackage",
    "alpm": "alpm",
}  # fmt: skip
DISTRO = ("deb", "rpm", "apk")

_EPOCH = re.compile(r"^\d+:")
_REVISION = re.compile(r"-[A-Za-z0-9.+~_]+$")
_REPACK = re.compile(r"[+~](?:dfsg|ds|repack)\d*$")
_LEADING_VERSION = re.compile(r"^(\d+\.\d+(?:\.\d+)*)")

# CUDA distribution packages: ``cuda-cudart-12-4``, ``libcublas-12-4``, ``libcudnn9-cuda-12``,
# ``libnccl2``, Debian's ``libcudart12``: stem after the -dev/-X-Y/-cuda-N/soversion
# suffixes -> product (through the collectors' conda and soname tables)
_CUDA_SUFFIXES = (
    re.compile(r"-(dev|devel|static|headers|doc|samples)$"),
    re.compile(r"-cuda-\d+$"),
    re.compile(r"-\d+-\d+$"),
    re.compile(r"-\d+$"),
    re.compile(r"(?<=[a-z])\d+$"),
)

def upstream(version: str | None, ecosystem: str | None) -> str | None:
    """``1:550.127.05-0ubuntu1`` -> ``550.127.05``: the upstream part of a distro version
    (the same rule as ``collectors._amd_intel.upstream_version``)."""
    if not version:
        return None
    v = version
    if ecosystem in DISTRO:
        v = _EPOCH.sub("", v)
        if "-" in v:
            v = _REVISION.sub("", v)
        v = _REPACK.sub("", v)
    return v or None


def _pypi(name: str) -> tuple[str, str] | None:
    dist = str(canonicalize_name(name))
    product = names.cuda_wheel(dist)
    if product:
        return ("cuda", product)
    return packages.product_of("pypi", dist)


def _conda(name: str) -> tuple[str, str] | None:
    product = names.cuda_conda().get(name)
    if product:
        return ("cuda", product)
    if name == "pytorch":
        return ("pytorch", "torch")
    return None


def _distro(name: str) -> tuple[str, str] | None:
    n = name.lower()
    # the container toolkit, driver user space, Intel/Khronos/Mesa and CUDA metapackages
    hit = packages.product_of("distro", n)
    if hit is not None:
        return hit
    # every stage of suffix stripping is a candidate: libamdhip64-5 -> libamdhip64 (ROCm),
    # libcudnn9-cuda-12 -> libcudnn9 -> libcudnn (CUDA)
    stems = [n]
    for rx in _CUDA_SUFFIXES:
        s = rx.sub("", stems[-1])
        if s and s != stems[-1]:
            stems.append(s)
    conda = names.cuda_conda()
    rocm = _lower_stems("rocm")
    for stem in stems:
        if stem in conda and stem not in ("cuda-toolkit", "cuda-version"):
            return ("cuda", conda[stem])
        if stem.startswith("lib") and names.library_product("cuda", stem):
            return ("cuda", str(names.library_product("cuda", stem)))
        # ROCm: Debian names (libamdhip64-5, librocblas0) and AMD's (rocblas, hip-runtime-amd)
        for cand in (stem.replace("_", "-"), "lib" + stem.replace("_", "-")):
            if cand in rocm:
                return ("rocm", rocm[cand])
    if n in ("hip-runtime-amd", "hip-runtime-nvidia"):
        return ("rocm", "hip-runtime")
    stem = stems[-1]
    for stack in ("level-zero", "intel-gpu"):  # libze-loader, libze-intel-gpu
        product = _lower_stems(stack).get(stem)
        if product:
            return (stack, product)
    return None


def _lower_stems(stack: str) -> dict[str, str]:
    """A stack's library stems as package names spell them (lower case, ``-`` for ``_``)."""
    return {k.lower().replace("_", "-"): v for k, v in names.libraries(stack).items()}


def classify(ecosystem: str | None, name: str, version: str | None) -> dict[str, str]:
    """GPU-stack properties for a package another tool listed; {} when it is none of ours."""
    if not ecosystem or not name:
        return {}
    if ecosystem == "pypi":
        hit = _pypi(name)
    elif ecosystem == "conda":
        hit = _conda(name)
    elif ecosystem in DISTRO:
        hit = _distro(name)
    elif ecosystem == "golang" and name.lower() == "github.com/nvidia/nvidia-container-toolkit":
        hit = ("nvidia-container-toolkit", "nvidia-container-toolkit")
    else:
        hit = None
    if hit is None:
        return _from_catalog(ecosystem, name, version)
    stack, product = hit
    props = {"stack": stack, "product": product, "classified-by": "package-name"}
    up = upstream(version, ecosystem)
    if stack == "nvidia-driver" and up:
        m = _LEADING_VERSION.match(up)  # 550.127.05 of 550.127.05-0ubuntu1~24.04
        up = m.group(1) if m else up
    if up and up != version:
        props["product-version"] = up
    return props


def _from_catalog(ecosystem: str, name: str, version: str | None) -> dict[str, str]:
    """A catalog row that names the package and says which collector product it is
    (``collector``, not ``*``): its stack and product, its version by the row's
    ``version_rule``."""
    from .. import catalog

    for row in catalog.by_package(ecosystem, name):
        if not any(c != "*" for c in row.collector):
            continue
        props = {"stack": row.stack, "product": row.product_id, "classified-by": "package-name"}
        up = catalog.product_version(row, ecosystem, version)
        if up and up != version:
            props["product-version"] = up
        return props
    return {}
