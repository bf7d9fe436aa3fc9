"""The internal model: what a scan found, independent of any SBOM format.

Writers, the advisory matcher, the gate and the inventory read only these
classes. Everything is plain data: dataclasses that serialise to and from the
native JSON (``to_dict``/``from_dict``) so a stored scan round-trips exactly.

One module over 500 lines: the model's classes refer to each other (a ``ScanResult`` holds its
components, findings and probe results) and serialise together to the one
native document.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any

from ._asdict import asdict
from .devicecode import DeviceCode

PROPERTY_NAMESPACE = "gpusbom"
SCHEMA_VERSION = "1"


class ComponentType(str, enum.Enum):
    """Mirrors the CycloneDX 1.6 component types we use."""

    APPLICATION = "application"
    LIBRARY = "library"
    FRAMEWORK = "framework"
    OPERATING_SYSTEM = "operating-system"
    DEVICE = "device"
    DEVICE_DRIVER = "device-driver"
    FIRMWARE = "firmware"
    PLATFORM = "platform"
    FILE = "file"
    CONTAINER = "container"


class EvidenceMethod(str, enum.Enum):
    """How a collector knows what it reports (kebab-case ids, used in SBOM properties)."""

    PACKAGE_DB = "package-db"  # dpkg status, rpmdb, apk installed, conda-meta
    PACKAGE_METADATA = "package-metadata"  # dist-info METADATA, egg-info PKG-INFO
    VERSION_FILE = "version-file"  # version.json, .info/version, ...
    HEADER = "header"  # #define in a C header
    SONAME = "soname"  # versioned shared-library file name
    ELF = "elf"  # content of an ELF file
    ELF_SYMBOL = "elf-symbol"  # a version getter's constant, decoded statically
    ELF_RODATA = "elf-rodata"  # a version string in an ELF file's data
    # the fingerprint database (gpusbom.fingerprints): the file's bytes / its ELF build-id
    # are a known release's, so its product and exact version are
    FINGERPRINT_SHA256 = "fingerprint-sha256"
    FINGERPRINT_BUILD_ID = "fingerprint-build-id"
    ENV = "env"  # image config environment
    LABEL = "label"  # image config labels
    FILENAME = "filename"  # other path-based evidence
    DEVICE = "device"  # live device enumeration (host scans)
    PROBE = "probe"  # smoke-test kernel
    SBOM = "sbom-declared"  # declared by an input SBOM (gpusbom scan --sbom)


@dataclass(frozen=True)
class LayerRef:
    """One image layer. ``diff_id`` (uncompressed digest) is the stable identity."""

    index: int
    diff_id: str | None
    digest: str | None = None  # blob digest as stored (compressed) when different
    media_type: str | None = None
    size: int | None = None
    created_by: str | None = None


@dataclass(frozen=True)
class Evidence:
    """Where and how a component was found."""

    collector: str
    method: str
    path: str | None = None  # absolute path inside the target
    layer: str | None = None  # diff_id of the layer holding that path
    detail: str | None = None  # e.g. the matched line or env var
    # SHA-256 (hex) of the file at ``path``, computed from its bytes as the layer streamed
    # (GPU binaries only: ``gpu-binaries`` evidence)
    sha256: str | None = None
    # ``ALG:HEX``: the digest of the file at ``path`` as its package declared it at install
    # time (dpkg ``md5sums`` -> ``md5:``, a wheel's ``RECORD`` -> ``sha256:``); not computed
    declared_digest: str | None = None


@dataclass(frozen=True)
class Product:
    """A GPU-stack product a component provides (one package may provide several:
    Intel's ``intel-opencl-icd`` holds the compute runtime, the Level Zero GPU
    driver and ocloc)."""

    stack: str
    name: str
    version: str | None = None


@dataclass(frozen=True)
class Relationship:
    """``source`` <type> ``target``, both bom-refs. Types: depends-on, contains."""

    source: str
    type: str
    target: str


@dataclass
class Component:
    """A software or hardware component found in the target, with its evidence."""

    name: str
    version: str | None
    type: ComponentType = ComponentType.LIBRARY
    purl: str | None = None
    cpe: str | None = None
    supplier: str | None = None
    description: str | None = None
    licenses: list[str] = field(default_factory=list)
    # Keys without the "gpusbom:" prefix; writers add the namespace. Product identity is
    # not here: it is ``products`` (writers derive its property view, product_properties)
    properties: dict[str, str] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    # Names (not refs) this component depends on, resolved to refs by the scanner.
    depends_on: list[str] = field(default_factory=list)
    bom_ref: str = ""
    # ecosystem id for dependency resolution ("deb", "rpm", "apk", "pypi", "conda", ...)
    ecosystem: str | None = None
    # The GPU-stack products this component provides, sorted; the one place product
    # identity is kept (collectors name their product here, fusion merges the lists)
    products: list[Product] = field(default_factory=list)
    # the device code of each file this component owns (gpusbom.devicecode); the cuda:*/hip:*
    # properties are their union, a summary
    device_code: list[DeviceCode] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Product identity given as properties (collectors and SBOM readers name a product
        # with ``stack``/``product``/``product-version``, a document read back carries the
        # writers' view) goes into ``products``, so that it is kept once
        # (a ``product`` alone is a device's own name, e.g. a PCI device's: left alone)
        if "stack" in self.properties or "products" in self.properties:
            named = take_product_properties(self.properties, self.name, self.version)
            if not self.products:
                self.products = named

    @property
    def product(self) -> Product | None:
        """The component's GPU-stack product: the first of ``products``; None if none."""
        return self.products[0] if self.products else None

    @property
    def stack(self) -> str | None:
        """The stack of the component's product (``cuda``, ``rocm`` ...); None if none."""
        return self.products[0].stack if self.products else None

    @property
    def product_name(self) -> str | None:
        """The name of the component's product (``cudnn``); None if it provides none."""
        return self.products[0].name if self.products else None

    @property
    def product_version(self) -> str | None:
        """The version of the component's product: its own, else the component's."""
        return (self.products[0].version if self.products else None) or self.version

    def identity(self) -> str:
        loc = self.evidence[0].path if self.evidence else ""
        return "|".join(
            [self.type.value, self.purl or "", self.name, self.version or "", loc or ""]
        )

    def assign_ref(self, taken: set[str]) -> str:
        """Deterministic bom-ref: readable prefix plus a hash of the identity."""
        h = hashlib.sha256(self.identity().encode()).hexdigest()[:12]
        base = f"{self.ecosystem or self.type.value}:{self.name}@{self.version or 'unknown'}"
        ref = f"{base}#{h}"
        n = 1
        while ref in taken:
            n += 1
            ref = f"{base}#{h}-{n}"
        taken.add(ref)
        self.bom_ref = ref
        return ref

    @property
    def layer(self) -> str | None:
        for ev in self.evidence:
            if ev.layer:
                return ev.layer
        return None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        d["type"] = self.type.value
        d["device_code"] = [x.to_dict() for x in self.device_code]
        if not d["device_code"]:  # absent unless the component owns device code
            del d["device_code"]
        for ev in d["evidence"]:
            if ev["sha256"] is None:  # only GPU binaries have one: keep the others as they were
                del ev["sha256"]
            if ev["declared_digest"] is None:  # only files a package manifest lists
                del ev["declared_digest"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Component:
        d = dict(d)
        d["type"] = ComponentType(d.get("type", "library"))
        d["evidence"] = [Evidence(**e) for e in d.get("evidence", [])]
        d["products"] = [Product(**p) for p in d.get("products", [])]
        d["device_code"] = [DeviceCode.from_dict(x) for x in d.get("device_code", [])]
        d["properties"] = dict(d.get("properties", {}))  # __post_init__ edits it
        return cls(**d)


PRODUCT_PROPERTY_KEYS = ("stack", "product", "product-version", "products")


def product_properties(c: Component) -> dict[str, str]:
    """The property view of ``c.products`` that writers render (``gpusbom:stack``,
    ``gpusbom:product``, ``gpusbom:product-version`` when the product's version is not the
    component's, ``gpusbom:products`` when there are several); derived, never stored."""
    p = c.product
    if p is None:
        return {}
    out = {"stack": p.stack, "product": p.name}
    pv = own_product_version(c)
    if pv:
        out["product-version"] = pv
    if len(c.products) > 1:
        out["products"] = ", ".join(
            f"{q.stack}/{q.name}@{q.version or 'unknown'}" for q in c.products)
    return out


def own_product_version(c: Component) -> str | None:
    """The version of ``c``'s product where it is not the component's own (cuDNN 9.1.0 in
    the package ``libcudnn9-cuda-12`` 9.1.0.70-1); None otherwise."""
    p = c.product
    return p.version if p is not None and p.version and p.version != c.version else None


def take_product_properties(props: dict[str, str], name: str,
                            version: str | None) -> list[Product]:
    """Read a product property view (``stack``/``product``/``product-version``/``products``,
    as :func:`product_properties` writes it) back into products, removing those keys from
    ``props``. Used where identity arrives as properties: SBOMs read back, documents."""
    view = {k: props.pop(k) for k in PRODUCT_PROPERTY_KEYS if k in props}
    out: list[Product] = []
    for item in (view.get("products") or "").split(", "):
        stack, sep, rest = item.strip().partition("/")
        pname, at, pver = rest.partition("@")
        if sep and at and stack and pname:
            out.append(Product(stack, pname, None if pver == "unknown" else pver))
    if not out and view.get("stack"):
        out.append(Product(view["stack"], view.get("product") or name,
                           view.get("product-version") or version))
    return sorted(set(out), key=product_sort_key)


def product_sort_key(p: Product) -> tuple[str, str, str]:
    """The order ``Component.products`` is kept in."""
    return (p.stack, p.name, p.version or "")


@dataclass(frozen=True)
class Unknown:
    """A collector that could not finish, or a file it could not read; the scan went on."""

    collector: str
    reason: str
    path: str | None = None


@dataclass
class Target:
    """What was scanned."""

    kind: str  # "image" | "directory" | "host"
    reference: str  # what the user passed
    source: str = ""  # docker | docker-archive | oci-archive | oci | dir | registry | host
    name: str | None = None  # repository name when known
    tags: list[str] = field(default_factory=list)
    manifest_digest: str | None = None
    image_id: str | None = None  # config digest
    platform: str | None = None  # os/arch[/variant]
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    os_release: dict[str, str] = field(default_factory=dict)
    layers: list[LayerRef] = field(default_factory=list)
    created: str | None = None
    #: hosts: first 16 hex of sha256(/etc/machine-id) (identity.machine_id_hash)
    host_id: str | None = None
    #: input SBOMs: the purl of the subject the SBOM describes (``pkg:oci``, ``pkg:container``)
    subject_purl: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        for key in ("host_id", "subject_purl"):  # absent unless set: scans serialise as before
            if d[key] is None:
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Target:
        d = dict(d)
        d["layers"] = [LayerRef(**x) for x in d.get("layers", [])]
        return cls(**d)


@dataclass
class StackPart:
    """One product of a GPU stack (cuDNN, NCCL, HIP runtime...) and every version found."""

    product: str
    display: str
    versions: list[str] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)


@dataclass
class StackSummary:
    """What a scan holds of one GPU stack (CUDA, ROCm, oneAPI, OpenCL, ...)."""

    stack: str  # id: cuda, nvidia-driver, rocm, oneapi, level-zero, opencl, vulkan, ...
    display: str  # "CUDA"
    present: bool
    release: str | None = None  # e.g. the CUDA toolkit release 13.0.2, when known
    parts: list[StackPart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # disagreements between sources

    def text(self) -> str:
        if not self.present:
            return f"{self.display} none"
        head = self.display + (f" {self.release}" if self.release else "")
        inner = ", ".join(
            f"{p.display} {' + '.join(p.versions) if p.versions else 'unknown'}"
            for p in self.parts
        )
        return f"{head} ({inner})" if inner else head

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StackSummary:
        d = dict(d)
        d["parts"] = [StackPart(**p) for p in d.get("parts", [])]
        return cls(**d)


class ProbeOutcome(str, enum.Enum):
    """What a smoke-test kernel run came to."""

    PASS = "pass"  # noqa: S105 - a probe status, not a password; the kernel ran and its result equals the CPU reference
    FAIL = "fail"  # the kernel ran and its result is wrong (see max_abs_error)
    ERROR = "error"  # the runtime reported an error (see error_code / error_name)
    TIMEOUT = "timeout"  # the child process did not finish in time and was killed
    SKIPPED = "skipped"  # no runtime, no driver, no device, no permission (see reason)


@dataclass
class ProbeResult:
    """One smoke-test kernel run: one backend (runtime) on one device.

    ``device`` is None for an outcome of the whole backend (its runtime is missing, or
    enumeration itself failed or hung). ``facts`` are what the runtime reports about
    the device (keys without the ``gpusbom:`` prefix: ``runtime-version``,
    ``driver-version``, ``compute-capability``, ``isa``, ``simd-width``,
    ``max-work-group-size``, ``local-memory-bytes``, ``pci-bus-id``, ``uuid``, ...).
    ``device_ref`` is the bom-ref of the device component the result is attached to.
    """

    backend: str  # cuda | opencl | hip | level-zero | sycl | vulkan
    outcome: str  # a ProbeOutcome value
    device: str | None = None  # device name as the runtime reports it
    device_id: str | None = None  # the backend's own index ("0", "1:0" platform:device)
    kernel: str | None = None
    reason: str | None = None  # skipped / timeout / error text
    error_code: int | None = None
    error_name: str | None = None  # e.g. CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
    max_abs_error: float | None = None
    seconds: float | None = None  # wall time of the child process
    facts: dict[str, str] = field(default_factory=dict)
    device_ref: str | None = None

    @property
    def label(self) -> str:
        """``cuda:0``, ``opencl:1:0``, ``hip`` (a backend-level result)."""
        return self.backend + (f":{self.device_id}" if self.device_id is not None else "")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeResult:
        return cls(**d)


@dataclass
class ToolInfo:
    """The tool that made the result: gpusbom's version and each collector's."""

    name: str = "gpusbom"
    version: str = ""
    collectors: dict[str, str] = field(default_factory=dict)  # id -> collector version


@dataclass(frozen=True)
class AdvisoryMatch:
    """What an advisory finding adds to a ``Finding`` (``Finding.advisory``).

    ``status``: ``affected`` (the version is in a vendor range), ``review`` (the vendor
    gives no machine-readable range, or the version cannot be judged: a person must
    look), ``not-affected`` (a VEX statement says so; ``justification`` says why).
    """

    advisory: str  # the advisory record id: NVIDIA-5747, INTEL-SA-01274, GHSA-...
    vulnerability: str  # CVE id (or the advisory id when it has none)
    status: str  # affected | review | not-affected
    product: str  # the advisory target matched: nvidia-driver, torch, ...
    installed_version: str | None = None
    fixed_version: str | None = None  # the fix for this component (its branch, for drivers)
    aliases: tuple[str, ...] = ()
    score: float | None = None
    score_type: str | None = None  # CVSS_V3_1 | CVSS_V4_0 | CVSS_V3_0
    vector: str | None = None
    urls: tuple[str, ...] = ()
    reason: str | None = None  # why affected / why review
    justification: str | None = None  # VEX justification for not-affected
    rule: str | None = None  # the matcher rule that decided (advisories.matcher.RULES)
    cwe: tuple[str, ...] = ()
    cve_state: str | None = None  # disputed | rejected (the CVE record's state)
    # set only from a database ``advisories update`` fetched (the user cache):
    kev: str | None = None  # the CVE is in CISA's KEV catalog: its dateAdded
    description: str | None = None  # the vendor's description of the CVE

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        d["aliases"] = list(self.aliases)
        d["urls"] = list(self.urls)
        d["cwe"] = list(self.cwe)
        # absent when unset: older reports read the same
        for k in ("rule", "cve_state", "kev", "description"):
            if d[k] is None:
                del d[k]
        if not d["cwe"]:
            del d["cwe"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AdvisoryMatch:
        d = dict(d)
        d["aliases"] = tuple(d.get("aliases", ()))
        d["urls"] = tuple(d.get("urls", ()))
        d["cwe"] = tuple(d.get("cwe", ()))
        return cls(**d)


@dataclass(frozen=True)
class Finding:
    """Something a scan concluded about the target, beyond listing components.

    Generic on purpose: host consistency checks (a user-space driver that does not
    match the kernel module), health notes and advisories all use it.
    ``components`` holds bom-refs, ``evidence`` paths inside the target.
    """

    id: str  # stable rule id, e.g. "host/driver-version-mismatch"
    kind: str  # consistency | inventory | health | advisory | ...
    severity: str  # info | low | medium | high | critical
    title: str
    detail: str | None = None
    components: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    # set on advisory findings (kind "advisory"); absent from the JSON otherwise
    advisory: AdvisoryMatch | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        d["components"] = list(self.components)
        d["evidence"] = list(self.evidence)
        if self.advisory is None:
            del d["advisory"]
        else:
            d["advisory"] = self.advisory.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        d = dict(d)
        d["components"] = tuple(d.get("components", ()))
        d["evidence"] = tuple(d.get("evidence", ()))
        if d.get("advisory") is not None:
            d["advisory"] = AdvisoryMatch.from_dict(d["advisory"])
        return cls(**d)


@dataclass
class ScanResult:
    """Everything one scan found: the target, its components and their relationships,
    what could not be determined (``unknowns``), advisory matches and findings."""

    target: Target
    components: list[Component] = field(default_factory=list)
    relationships: list[Relationship] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)
    tool: ToolInfo = field(default_factory=ToolInfo)
    timestamp: str | None = None  # ISO 8601; SOURCE_DATE_EPOCH when set
    stacks: list[StackSummary] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # smoke-test kernel results (gpusbom probe, scan --host --probe); empty otherwise
    probes: list[ProbeResult] = field(default_factory=list)
    # the advisory database matched against: source, built, age_days, advisories (count)
    advisory_db: dict[str, Any] | None = None

    def stack_text(self) -> str:
        """One line: "CUDA 13.0.2 (cudart 13.0.96, cuDNN 9.14.0 + 9.19.0.56); ROCm none; ..."."""
        return "; ".join(s.text() for s in self.stacks)

    @property
    def complete(self) -> bool:
        return not self.unknowns

    def component_by_ref(self, ref: str) -> Component | None:
        for c in self.components:
            if c.bom_ref == ref:
                return c
        return None

    def probes_for(self, ref: str) -> list[ProbeResult]:
        """Probe results attached to the component ``ref``, in a stable order."""
        return sorted(
            (p for p in self.probes if p.device_ref == ref),
            key=lambda p: (p.backend, p.device_id or "", p.device or ""),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": f"gpusbom/scan/{SCHEMA_VERSION}",
            "tool": asdict(self.tool),
            "timestamp": self.timestamp,
            "target": self.target.to_dict(),
            "components": [c.to_dict() for c in self.components],
            "relationships": [asdict(r) for r in self.relationships],
            "unknowns": [asdict(u) for u in self.unknowns],
            "stacks": [asdict(st) for st in self.stacks],
        }
        if self.findings:  # absent when empty: image scans serialise as before
            out["findings"] = [f.to_dict() for f in self.findings]
        if self.probes:  # absent when not probed: scans serialise as before
            out["probes"] = [p.to_dict() for p in self.probes]
        if self.advisory_db is not None:
            out["advisory_db"] = dict(self.advisory_db)
        return out

    def to_document(self) -> dict[str, Any]:
        """The native JSON document (what the ``json`` writer prints and the inventory
        stores and hashes): ``to_dict`` with each component's product identity also in
        its properties, as every SBOM shows it (:func:`product_properties`); ``from_dict``
        reads it back into ``products``."""
        d = self.to_dict()
        for cd, c in zip(d["components"], self.components, strict=True):
            cd["properties"].update(product_properties(c))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScanResult:
        return cls(
            target=Target.from_dict(d["target"]),
            components=[Component.from_dict(c) for c in d.get("components", [])],
            relationships=[Relationship(**r) for r in d.get("relationships", [])],
            unknowns=[Unknown(**u) for u in d.get("unknowns", [])],
            tool=ToolInfo(**d.get("tool", {})),
            timestamp=d.get("timestamp"),
            stacks=[StackSummary.from_dict(x) for x in d.get("stacks", [])],
            findings=[Finding.from_dict(x) for x in d.get("findings", [])],
            probes=[ProbeResult.from_dict(p) for p in d.get("probes", [])],
            advisory_db=d.get("advisory_db"),
        )
