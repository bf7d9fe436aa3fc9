"""Per-file GPU device code: the record every binary with device code keeps in the model.

A :class:`DeviceCode` is one file (an ELF shared library or executable, a ``.cubin``,
``.fatbin``, ``.hsaco``, an Intel zebin, a model artifact such as a Triton cache entry) and
the device-code targets *that file* holds. ``Component.device_code`` lists them for the
component owning the files (the wheel, the deb, or a stand-alone file component); the
component's own ``cuda:sass``/``cuda:ptx``/``hip:gfx``... properties are only the **union**
of its files' targets, a summary (:func:`union`), and ``device-code-files`` says over how
many files it is taken.

``targets`` maps a target key to a comma-separated, sorted value set, with the same keys as
the component properties:

==================  =====================================================================
``cuda:sass``       SASS (cubin) architectures: ``sm_80,sm_90,sm_90a``
``cuda:ptx``        PTX virtual architectures: ``compute_90``
``cuda:ptx-isa``    PTX ISA versions of that PTX: ``8.4``
``cuda:lto``        LTO-IR (NVVM) architectures
``cuda:compressed`` fatbin compressions seen (``lz4,zstd``)
``hip:targets``     full HIP offload target ids; ``hip:gfx`` the gfx processors with features
``hip:compressed``  bundle compressions
``intel:aot``       Intel AOT zebin configs by name (``pvc-xt-c0``; ``ip-35.11.0`` unknown)
``intel:ip``        their IP versions (``12.60.7``); ``intel:spirv`` ``spir64`` (JIT code)
``intel:sycl-targets`` DPC++ targets named in the file (``spir64``, ``spir64_gen``)
==================  =====================================================================

Plugging in another kind of device code (Intel SYCL offload bundles and zebin, model
artifacts): emit a ``Component`` whose ``device_code`` holds one ``DeviceCode`` per file
(``collector`` your collector id, ``kind``/``format`` what the file is) with your own
namespaced keys in ``targets`` (e.g. ``intel:aot``, ``intel:spirv``), add the set-valued
keys to :data:`UNION_KEYS` and the key prefix to :data:`VENDOR_OF_PREFIX`; fusion then keeps
the record on the owning package, every writer renders it (CycloneDX nested ``file``
components, SPDX file elements, JSON, table) and ``check`` judges each file with the judge
registered for its vendor (:mod:`gpusbom.compat.binaries`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeviceCode", "UNION_KEYS", "VENDOR_OF_PREFIX", "merge", "union", "union_values",
           "vendors"]

#: set-valued target keys: the component summary is their union over the files
UNION_KEYS: set[str] = {
    "cuda:sass", "cuda:ptx", "cuda:ptx-isa", "cuda:lto", "cuda:compressed",
    "hip:targets", "hip:gfx", "hip:compressed",
    "intel:aot", "intel:ip", "intel:spirv", "intel:sycl-targets",
}

#: the GPU vendor a target key's prefix is device code for; ``compressed``/``ptx-isa`` keys
#: describe code, they are not code: see :data:`CODE_KEYS`
VENDOR_OF_PREFIX: dict[str, str] = {"cuda": "nvidia", "hip": "amd", "intel": "intel"}

#: the keys whose presence means the file holds device code for the vendor
CODE_KEYS: set[str] = {"cuda:sass", "cuda:ptx", "cuda:lto", "hip:gfx", "hip:targets",
                        "intel:aot", "intel:spirv"}


@dataclass(frozen=True)
class DeviceCode:
    """The device code one file holds.

    ``path``: absolute path inside the target; ``targets``: key -> comma-separated sorted
    values (see the module docstring); ``kind``: ``library`` | ``executable`` |
    ``code-object`` (a bare cubin/fatbin/hsaco/zebin file) | ``artifact`` (a model artifact);
    ``format``: what the container is when known (``elf``, ``cubin``, ``fatbin``,
    ``hsaco``, ``zebin``, ``triton-cache``...); ``layer``: diff_id of the layer holding it;
    ``sha256``: of the file's bytes; ``collector``: who read it; ``detail``: one line of what
    was decoded (entry and container counts)."""

    path: str
    targets: dict[str, str] = field(default_factory=dict)
    kind: str = "library"
    format: str | None = None
    layer: str | None = None
    sha256: str | None = None
    collector: str = "gpu-binaries"
    detail: str | None = None

    def values(self, key: str) -> list[str]:
        """The values of one target key as a list (empty when absent)."""
        return [x for x in self.targets.get(key, "").split(",") if x]

    @property
    def vendors(self) -> set[str]:
        """The GPU vendors this file holds device code for (``nvidia``, ``amd``, ...)."""
        return {VENDOR_OF_PREFIX.get(k.split(":", 1)[0], "unknown")
                for k, v in self.targets.items() if k in CODE_KEYS and v}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "kind": self.kind,
                             "targets": dict(sorted(self.targets.items())),
                             "collector": self.collector}
        for k in ("format", "layer", "sha256", "detail"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceCode:
        return cls(path=str(d["path"]),
                   targets={str(k): str(v) for k, v in dict(d.get("targets") or {}).items()},
                   kind=str(d.get("kind") or "library"), format=d.get("format"),
                   layer=d.get("layer"), sha256=d.get("sha256"),
                   collector=str(d.get("collector") or "gpu-binaries"), detail=d.get("detail"))


def vendors(codes: Iterable[DeviceCode]) -> set[str]:
    """The vendors any of ``codes`` holds device code for."""
    out: set[str] = set()
    for c in codes:
        out |= c.vendors
    return out


def _set_sort_key(item: str) -> tuple[str, int, str]:
    # sm_90 < sm_90a < sm_100; compute_* likewise; 8.4 < 8.10; other values by text
    prefix, sep, rest = item.partition("_")
    if not sep:
        head, _, tail = item.partition(".")
        if head.isdigit() and tail.isdigit():
            return ("", int(head) * 1000 + int(tail), "")
        return (item, -1, "")
    digits = ""
    for ch in rest:
        if not ch.isdigit():
            break
        digits += ch
    return (prefix, int(digits) if digits else -1, rest[len(digits) :])


def union_values(a: str, b: str) -> str:
    """Union of two comma-separated value sets, sorted (architectures numerically)."""
    items = {x.strip() for x in f"{a},{b}".split(",") if x.strip()}
    return ",".join(sorted(items, key=_set_sort_key))


def union(codes: Iterable[DeviceCode]) -> dict[str, str]:
    """The summary of several files: each target key's union over them."""
    out: dict[str, str] = {}
    for c in codes:
        for k, v in c.targets.items():
            out[k] = union_values(out.get(k, ""), v) if k in UNION_KEYS else out.get(k, v)
    return out


def merge(into: list[DeviceCode], more: Iterable[DeviceCode]) -> None:
    """Add ``more`` to ``into`` (one record per path, the first kept), sorted by path."""
    seen = {c.path for c in into}
    for c in more:
        if c.path not in seen:
            into.append(c)
            seen.add(c.path)
    into.sort(key=lambda c: c.path)
