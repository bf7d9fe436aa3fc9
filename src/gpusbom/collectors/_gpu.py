"""Shared helpers of the GPU stack collectors (not a collector: the leading ``_``
keeps the registry from importing it as one).

- ``parse_soname(filename)``: ``libcudart.so.12.4.127`` -> ``Soname("libcudart", "12.4.127")``;
  ``Soname.version`` is the suffix only when it has at least two numeric parts
  (``libcudart.so.12`` names an ABI, not a release; ``libcudart.so`` names nothing).
- ``is_regular(fs, path)``: the entry itself is a file (a symlink's name is never a version).
- ``parse_defines(text)``: ``#define NAME value`` lines of a C header -> {NAME: value}.
- ``install_location(path)``: the install root a file belongs to (``/usr/local/cuda-12.4``,
  ``/usr``, ``.../site-packages/nvidia/cudnn``, ``.../site-packages/nvidia/cu13``).
- ``is_stub(path)``, ``is_bundled(path)``: false-positive guards (link stubs; NVIDIA tools
  bundled inside another product such as OpenAI Triton's ``backends/nvidia``).
- ``parse_require_cuda(expr)``: the ``NVIDIA_REQUIRE_CUDA`` expression.
- ``Observations``: accumulates evidence per (product, location) from several sources with
  a version per source, then builds one ``Component`` each (stand-alone identity:
  ``pkg:generic/<vendor>/<product>@<version>``, supplier, CPE when NVD has one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packageurl import PackageURL

from .. import catalog
from ..fsview.types import EntryKind
from ..model import Component, ComponentType, Evidence
from .base import VIEW_ERRORS

NVIDIA = "NVIDIA Corporation"

_SONAME_RX = re.compile(r"^(?P<stem>[A-Za-z0-9_+\-]+?)\.so(?:\.(?P<suffix>\d+(?:\.\d+)*))?$")
_DEFINE_RX = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+([^\r\n]*?)[ \t]*(?:/[/*].*)?$",
    re.MULTILINE,
)
_SITE_RX = re.compile(r"^(?P<sp>.*/(?:site|dist)-packages)/(?P<rest>.*)$")
_TRIPLET_RX = re.compile(r"^[a-z0-9_]+-linux(?:-gnu[a-z]*)?$")
_ROOT_DIRS = ("lib", "lib64", "include", "bin", "sbin")


@dataclass(frozen=True)
class Soname:
    """A shared library's name split into its stem and version suffix."""

    stem: str  # libcudart
    suffix: str | None  # "12.4.127", "12" or None

    @property
    def version(self) -> str | None:
        """The version the file name carries; None for ``.so`` and ``.so.<major>``."""
        if self.suffix and "." in self.suffix:
            return self.suffix
        return None

    @property
    def major(self) -> str | None:
        return self.suffix.split(".")[0] if self.suffix else None


def parse_soname(filename: str) -> Soname | None:
    m = _SONAME_RX.match(filename.rsplit("/", 1)[-1])
    if not m:
        return None
    return Soname(m.group("stem"), m.group("suffix"))


def is_regular(fs: object, path: str) -> bool:
    """True when ``path`` itself (not following a final symlink) is a regular file."""
    try:
        e = fs.lookup(path, follow=False)  # type: ignore[attr-defined]
    except VIEW_ERRORS:  # a link loop on the way: not a regular file here
        return False
    return e is not None and e.kind in (EntryKind.FILE, EntryKind.HARDLINK)


def parse_defines(text: str) -> dict[str, str]:
    """``#define NAME value`` -> {NAME: value} (first definition wins; comments stripped)."""
    out: dict[str, str] = {}
    for m in _DEFINE_RX.finditer(text):
        out.setdefault(m.group(1), m.group(2).strip())
    return out


def int_define(defs: dict[str, str], name: str) -> int | None:
    v = defs.get(name)
    if v is None:
        return None
    v = v.strip("() \t").rstrip("uUlL")
    try:
        return int(v, 0)
    except ValueError:
        return None


def site_packages(path: str) -> str | None:
    m = _SITE_RX.match(path)
    return m.group("sp") if m else None


def install_location(path: str) -> str:
    """The install root of a file (see the module doc)."""
    m = _SITE_RX.match(path)
    if m:
        parts = m.group("rest").split("/")
        keep = 2 if parts[0] == "nvidia" and len(parts) > 2 else 1
        return m.group("sp") + "/" + "/".join(parts[:keep])
    parts = path.split("/")
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] in _ROOT_DIRS:
            root = parts[:i]
            if len(root) >= 2 and root[-2] == "targets":  # cuda-12.4/targets/x86_64-linux/lib
                root = root[:-2]
            return "/".join(root) or "/"
    return path.rsplit("/", 1)[0] or "/"


def is_stub(path: str) -> bool:
    """Link-time stubs (``lib64/stubs/libcuda.so``) are not a driver or a library install."""
    return "/stubs/" in path


def is_bundled(path: str) -> bool:
    """NVIDIA files shipped inside another product (OpenAI Triton's ``backends/nvidia``)."""
    return "/triton/backends/" in path or "/triton/_C/" in path


def generic_purl(vendor: str, product: str, version: str | None) -> str:
    return PackageURL(type="generic", namespace=vendor, name=product, version=version).to_string()


def major_minor(version: str | None) -> str | None:
    if not version:
        return None
    parts = re.split(r"[.\-+]", version)
    nums = [p for p in parts[:2] if p.isdigit()]
    return ".".join(nums) if len(nums) == 2 else None


def version_from_code(code: int, *, minor_factor: int = 10) -> str:
    """``CUDA_VERSION``-style codes: 12040 -> "12.4" (major*1000 + minor*10)."""
    return f"{code // 1000}.{(code % 1000) // minor_factor}"


@dataclass(frozen=True)
class RequireCuda:
    """``NVIDIA_REQUIRE_CUDA``: ``cuda>=12.4 brand=tesla,driver>=470,driver<471 ...``.

    Clauses are separated by spaces; within a clause, commas mean AND. The ``cuda``
    constraint applies to the whole image; the brand clauses are alternatives (OR): each
    names a driver branch the image's forward-compat libraries support.
    """

    cuda: str | None  # "12.4" from cuda>=12.4
    branches: tuple[str, ...]  # ("470", "535"), numeric order
    clauses: tuple[tuple[str, ...], ...]

    @property
    def branches_text(self) -> str:
        return ", ".join(self.branches)


_CONSTRAINT_RX = re.compile(r"^(?P<key>[a-z_]+)\s*(?P<op>>=|<=|==|=|>|<)\s*(?P<val>\S+)$")


def parse_require_cuda(expr: str) -> RequireCuda:
    clauses: list[tuple[str, ...]] = []
    cuda: str | None = None
    branches: set[int] = set()
    for clause in expr.split():
        terms = tuple(t for t in clause.split(",") if t)
        clauses.append(terms)
        for t in terms:
            m = _CONSTRAINT_RX.match(t)
            if not m:
                continue
            key, op, val = m.group("key"), m.group("op"), m.group("val")
            if key == "cuda" and op in (">=", "=", "==") and cuda is None:
                cuda = val
            elif key == "driver" and op in (">=", "=", "=="):
                head = val.split(".")[0]
                if head.isdigit():
                    branches.add(int(head))
    return RequireCuda(cuda, tuple(str(b) for b in sorted(branches)), tuple(clauses))


# ----------------------------------------------------------------------- observations


@dataclass
class _Obs:
    """What was seen of one library at one location, with candidate versions."""

    name: str
    location: str
    versions: list[tuple[int, str, str]] = field(
        default_factory=list
    )  # (priority, version, source)
    evidence: list[Evidence] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)
    type: ComponentType = ComponentType.LIBRARY


class Observations:
    """Evidence per (product, location); ``build()`` makes one Component per key.

    The version of a component is the one from its highest-priority source; a source
    whose version is neither equal to nor a prefix of it (``12.4`` from a header agrees
    with ``12.4.127`` from a soname) is reported in ``disagreement``.
    """

    def __init__(self, stack: str, vendor: str = "nvidia", supplier: str = NVIDIA) -> None:
        self.stack = stack
        self.vendor = vendor
        self.supplier = supplier
        self._obs: dict[tuple[str, str], _Obs] = {}
        self.cpe_products: dict[str, str] = {}  # product -> NVD product id

    def add(
        self,
        name: str,
        location: str,
        evidence: Evidence | None = None,
        *,
        version: str | None = None,
        priority: int = 0,
        source: str = "",
        ctype: ComponentType | None = None,
        **props: str,
    ) -> _Obs:
        o = self._obs.get((name, location))
        if o is None:
            o = self._obs[(name, location)] = _Obs(name, location)
        if evidence is not None and evidence not in o.evidence:
            o.evidence.append(evidence)
        if version:
            o.versions.append((priority, version, source or (evidence.method if evidence else "")))
        if ctype is not None:
            o.type = ctype
        for k, v in props.items():
            if v:
                o.properties.setdefault(k.replace("_", "-"), v)
        return o

    def get(self, name: str, location: str) -> _Obs | None:
        return self._obs.get((name, location))

    def items(self) -> list[_Obs]:
        return list(self._obs.values())

    @staticmethod
    def chosen_version(o: _Obs) -> str | None:
        if not o.versions:
            return None
        best = max(o.versions, key=lambda t: (t[0], len(t[1])))
        return best[1]

    def build(self) -> list[Component]:
        out: list[Component] = []
        for (name, loc), o in sorted(self._obs.items()):
            if not o.evidence:
                continue
            version = self.chosen_version(o)
            props = {"stack": self.stack, "product": name}
            if loc:
                props["location"] = loc
            props.update(o.properties)
            if version:
                bad = sorted(
                    {
                        f"{src} says {v}"
                        for _, v, src in o.versions
                        if v != version
                        and not version.startswith(v + ".")
                        and not v.startswith(version + ".")
                    }
                )
                if bad:
                    note = f"version {version}, but " + "; ".join(bad)
                    old = props.get("disagreement")
                    props["disagreement"] = f"{old}; {note}" if old else note
            cpe_product = self.cpe_products.get(name)
            out.append(
                Component(
                    name=name,
                    version=version,
                    type=o.type,
                    purl=generic_purl(self.vendor, name, version),
                    cpe=catalog.cpe23(f"{self.vendor}:{cpe_product}", version) if cpe_product else None,
                    supplier=self.supplier,
                    properties=props,
                    evidence=list(o.evidence),
                    ecosystem="generic",
                )
            )
        return out
