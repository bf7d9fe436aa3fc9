"""cuda: the CUDA toolkit release and its components, cuDNN, NCCL, TensorRT, NVSHMEM,
cuSPARSELt and cuTENSOR, one component per (product, install location).

The products and how each is found are the catalog's rows (stack ``cuda``, or
``found_as: cuda/...``; fields in ``catalog/detection.py``); this module runs the generic
strategies (``collectors/strategies``) over them and holds what is this stack's own: the
order of the evidence, the cuBLAS/cuBLASLt release pairing and the toolkit's properties.

Evidence, by version priority (highest wins; a lower source whose version is not a prefix
of the chosen one is reported in ``disagreement``):

6. the fingerprint database (``gpusbom.fingerprints``, strategy ``fingerprints``): a shared
   library whose SHA-256 or ELF build-id is a known release's file gets that product and
   exact version, whatever its name (renamed, stripped, vendored);

Before the choice, every candidate is checked against the database's vendor release lists
(strategy ``releases``): one that is not a release of its product is dropped and kept as
evidence (``rejected-versions``), never reported.

5. ``version.json`` of a toolkit root (``/usr/local/cuda*``): the ``cuda`` entry is the
   release; per-component entries give versions of components *seen as files* at that root
   (version.json lists the whole SDK even when a runtime image holds a part of it);
4. package metadata: ``nvidia-*`` wheels (cu12 ``nvidia/<comp>`` layout and the cu13 shared
   ``nvidia/cu13`` layout, located through the wheel's RECORD), ``conda-meta`` records,
   ``version.txt`` (CUDA <= 11.0: ``CUDA Version 11.0.207``);
3. versioned sonames (regular files only: ``libcudart.so.12.4.127``; ``.so`` and
   ``.so.<major>`` names are not versions), full-version headers (``cudnn_version.h``,
   ``nccl.h``, ``NvInferVersion.h``) and classifier rows (versions read from binaries);
2. image env ``CUDA_VERSION`` (on the toolkit the image's ``/usr/local/cuda`` points at);
1. ``cuda.h`` ``CUDA_VERSION`` / ``cuda_runtime_api.h`` ``CUDART_VERSION`` (major.minor);
0. the root's directory name (``cuda-12.4``).

``NV_*`` env vars (the rows' ``env``) are recorded on the toolkit component as
``env-declared`` and compared with what is installed; ``NVIDIA_REQUIRE_CUDA`` gives
``require-cuda`` and ``driver-branches``. ``CUDA_VERSION`` vs the installed runtime
(major.minor) is checked.

Guards: link stubs (``*/stubs/*``) and NVIDIA files bundled in OpenAI Triton
(``triton/backends/nvidia``) are ignored; a toolkit component is only made for a
``/usr/local/cuda*`` root, a conda record of the release, or the env.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..catalog import detection, names
from ..fsview.spec import PathSpec
from ..identification import decided_by
from ..model import Component
from . import cuda_parts, register
from ._gpu import Observations
from .base import CollectContext, Collector
from .strategies import (
    P_HEADER,
    P_PKG,
    classified,
    env,
    fingerprints,
    headers,
    packages,
    releases,
    sonames,
    version_files,
)
from .strategies import renamed_stem as renamed_stem
from .strategies.headers import versions as header_versions
from .strategies.headers import wanted as header_wanted
from .strategies.packages import wheel_product

__all__ = ["CHECKED_TOOLS", "STACK", "CudaCollector", "header_versions", "header_wanted",
           "renamed_stem", "wheel_product"]

STACK = "cuda"


def _release() -> detection.ReleaseSpec:
    rel = detection.release(STACK)
    if rel is None:  # a packaging bug: the shipped catalog has the row (tests load it)
        raise RuntimeError(f"catalog: no release row for stack {STACK}")
    return rel


#: toolkit executables whose presence under ROOT/bin is recorded on the toolkit component
#: (``bin-tools``): a CUDA Toolkit CVE in one of them is proven not to apply when it is
#: absent (advisory rule ``cuda-part-absent``); the release row's ``bin_tools``
CHECKED_TOOLS: tuple[str, ...] = _release().bin_tools


def _paths() -> tuple[PathSpec, ...]:
    return (
        *version_files.path_specs(STACK),
        *sonames.path_specs(STACK),
        *headers.path_specs(STACK),
        *packages.path_specs(STACK),
        *classified.path_specs(STACK),
        *cuda_parts.path_specs(),
        *fingerprints.path_specs(),
    )


@register
class CudaCollector(Collector):
    id = STACK
    version = "5"  # 3: fingerprint identification; 4: release-list check; 5: confidence
    phase = 2
    paths = _paths()

    def collect(self, ctx: CollectContext) -> Iterable[Component]:
        rel = _release()
        obs = Observations(STACK)
        if rel.cpe_product:
            obs.cpe_products[rel.product] = rel.cpe_product
        sonames.collect(ctx, obs)
        classified.collect(ctx, obs)
        headers.collect(ctx, obs)
        packages.collect_wheels(ctx, obs)
        packages.collect_conda(ctx, obs)
        roots = version_files.collect(ctx, obs)
        env.collect(ctx, obs, roots.roots)
        _release_pairs(obs)
        fingerprints.collect(ctx, obs)
        releases.vet(obs)
        parts = cuda_parts.found(ctx.fs)
        for o in obs.items():
            v = obs.chosen_version(o)
            if o.name == rel.product:
                cuda_parts.annotate(o.properties, parts)
                if v:
                    o.properties["release"] = v
                if o.location in roots.bin_tools:
                    o.properties["bin-tools-checked"] = " ".join(rel.bin_tools)
                    o.properties["bin-tools"] = " ".join(roots.bin_tools[o.location])
            # how the chosen version was read, when a classifier row gave it
            best = max(o.versions, key=lambda t: (t[0], len(t[1])), default=None)
            if best is not None and best[2].startswith("elf-"):
                method, _, conf = best[2].partition(" ")
                o.properties["version-method"] = method
                o.properties["version-confidence"] = conf.rsplit(" ", 1)[-1]
            elif best is not None and best[2].startswith("fingerprint "):
                o.properties["version-method"] = "fingerprint-" + best[2].split(" ", 1)[1]
                o.properties["version-confidence"] = "exact"
            # which method decided, and how sure it is (a presence with no version: low)
            if best is not None:
                method, conf = decided_by(best[2], best[0])
            else:
                method, conf = (o.evidence[0].method if o.evidence else "filename"), "low"
            o.properties["identification-method"] = method
            o.properties["identification-confidence"] = conf
        return obs.build()


def _release_pairs(obs: Observations) -> None:
    """Libraries shipped in the same packages (a row's ``shares_release_with``: cuBLAS and
    cuBLASLt): one with no version of its own takes its sibling's (same install location),
    said so; the sibling gets the version the packages or ``version.json`` give for both."""
    stems = names.libraries(STACK)
    for f in detection.found(STACK):
        sib = f.shares_release_with
        if not sib:
            continue
        stem = next((s for s, p in stems.items() if p == sib), sib)
        for o in obs.items():
            if o.name != f.product:
                continue
            lt = obs.get(sib, o.location)
            if lt is None:
                continue
            v = obs.chosen_version(lt)
            if not o.versions and v:
                o.versions.append((P_HEADER, v, f"sibling {stem} (same release)"))
                o.properties.setdefault("version-from", sib)
                o.properties.setdefault("version-method", "sibling")
                o.properties.setdefault("version-confidence", "medium")
            for prio, v, src in list(o.versions):
                if prio >= P_PKG:  # a package's or version.json's: it covers both libraries
                    lt.versions.append((prio, v, src))
