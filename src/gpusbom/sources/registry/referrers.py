"""What a registry holds *about* an image: the OCI 1.1 referrers of a manifest.

    discover(client, subject_digest) -> Discovery   (the referrer descriptors)
    fetch(client, referrer)          -> list[Attachment]   (their documents, classified)
    read_attachments(client, digests) -> Attachments       (both, never raising)

``discover`` asks the referrers API (``GET /v2/<name>/referrers/<digest>``) and, where the
registry has none (Debian's docker-registry 2.8 answers 404), the referrers tag schema: the
image index tagged ``sha256-<hex>`` that OCI 1.1 clients keep beside the subject; and
cosign's attestation tag ``sha256-<hex>.att`` (cosign's default outside OCI 1.1 mode).

``fetch`` reads one referrer's manifest (digest-checked) and its layers (each at most
``MAX_ATTACHMENT_BYTES``, digest-checked, at most ``MAX_LAYERS``) and classifies each by its
content, never by what its media type claims:

* ``sbom``: CycloneDX (JSON or XML) or SPDX (JSON or tag-value);
* ``vex``: OpenVEX, or CycloneDX whose vulnerabilities carry an ``analysis``;
* the same wrapped in an in-toto Statement, itself bare or in a DSSE envelope (also inside
  a Sigstore bundle): the predicate is the document; an attestation whose ``subject``
  names digests none of which is the image's is refused. Signatures are *not* verified:
  an attachment is as trustworthy as write access to the repository (see
  docs/registry-attachments.md);
* ``attestation``: any other in-toto predicate (provenance and the like), recorded only.

Everything read is hostile: sizes, counts and nesting are bounded, and a malformed
referrer is one warning (``Attachments.warnings``) while the scan goes on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import DigestMismatchError, ImageFormatError, InputError
from ...safetext import loads_json
from .ref import DIGEST_RE

if TYPE_CHECKING:
    from .client import RegistryClient

__all__ = [
    "MAX_ATTACHMENT_BYTES",
    "Attachment",
    "Attachments",
    "Budget",
    "Discovery",
    "Referrer",
    "classify",
    "discover",
    "fetch",
    "fallback_tag",
    "read_attachments",
]

log = logging.getLogger(__name__)

INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
#: referrers listed per subject (the rest is left, with a warning)
MAX_REFERRERS = 64
#: layers read per referrer
MAX_LAYERS = 8
#: one attached document (a full Syft SBOM of a large CUDA image is a few MB)
MAX_ATTACHMENT_BYTES = 64 << 20
#: every attached document of one image together (what a scan keeps in memory)
MAX_TOTAL_BYTES = 256 << 20
#: a referrers index / referrer manifest
MAX_INDEX_BYTES = 4 << 20
INTOTO_PAYLOAD = "application/vnd.in-toto+json"
DSSE_TYPE = "application/vnd.dsse.envelope.v1+json"
DOCKER_MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"


@dataclass(frozen=True)
class Referrer:
    """One descriptor of a referrers index: a manifest whose ``subject`` is ``subject``."""

    digest: str
    media_type: str
    artifact_type: str | None
    size: int | None
    subject: str
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Discovery:
    """The referrers of ``subject`` and how they were found: ``api``, ``tag`` or ``none``,
    with ``+cosign`` (or ``cosign`` alone) when cosign's ``.att`` tag had attestations."""

    subject: str
    referrers: tuple[Referrer, ...]
    via: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attachment:
    """One document attached to an image: what it is, and its bytes (unwrapped)."""

    kind: str  # sbom | vex | attestation
    format: str  # cyclonedx | spdx | openvex | in-toto
    document: bytes  # the SBOM / VEX itself (an in-toto predicate re-serialised as JSON)
    referrer: Referrer
    blob: str  # the layer digest it came from
    predicate_type: str | None = None

    @property
    def digest(self) -> str:
        """The referrer manifest's digest: what a finding names as its origin."""
        return self.referrer.digest

    def origin(self, registry: str = "") -> str:
        where = f" in {registry}" if registry else ""
        return f"registry attachment {self.referrer.digest}{where}"


@dataclass
class Attachments:
    """Every attachment read for an image, and one warning per referrer that failed."""

    items: list[Attachment] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    discovered: list[Discovery] = field(default_factory=list)
    registry: str = ""

    def of_kind(self, kind: str) -> list[Attachment]:
        return [a for a in self.items if a.kind == kind]


# --------------------------------------------------------------------------- discover


def fallback_tag(subject: str) -> str:
    """The referrers tag schema's tag for ``subject``: ``sha256-<hex>``."""
    algo, _, hexd = subject.partition(":")
    return f"{algo}-{hexd}"


class _Missing(InputError):
    pass


def _missing(detail: str) -> InputError:
    return _Missing(detail)


def discover(
    client: RegistryClient, subject: str, *, artifact_type: str | None = None
) -> Discovery:
    """The referrers of the manifest ``subject`` (a ``sha256:`` digest): the referrers API,
    else the ``sha256-<hex>`` tag; ``InputError`` when what the registry sent is unusable."""
    if not DIGEST_RE.match(subject):
        raise ImageFormatError(f"{client.label}: {subject!r} is not a manifest digest")
    repo = client.ref.repository
    what = f"referrers of {repo}@{subject}"
    resp = None
    try:
        resp = client.request(
            "GET", f"/v2/{repo}/referrers/{subject}", what=what,
            headers={"Accept": INDEX_TYPE}, stream=True, ok=(200,), not_found=_missing,
        )
    except _Missing:
        resp = None
    except InputError as e:
        # 400 / 405 / 501 from registries that route the path elsewhere: try the tag
        if "unexpected HTTP" not in str(e):
            raise
        resp = None
    via = "api"
    body: bytes | None = None
    if resp is not None:
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
        body = _read(client, resp, what)
        if ctype and ctype != INDEX_TYPE and not ctype.endswith("json"):
            resp = None  # an HTML page of a front end, not an answer of the API
    if resp is None:
        via = "tag"
        tag = fallback_tag(subject)
        try:
            tresp = client.request(
                "GET", f"/v2/{repo}/manifests/{tag}", what=f"referrers tag {repo}:{tag}",
                headers={"Accept": INDEX_TYPE}, stream=True, not_found=_missing,
            )
            body = _read(client, tresp, f"referrers tag {repo}:{tag}")
        except _Missing:
            body, via = None, "none"
    refs: list[Referrer] = []
    warnings: list[str] = []
    if body is not None:
        refs, warnings = _parse_index(body, subject, artifact_type,
                                      f"{client.label}: {what} ({via})")
    if artifact_type in (None, DSSE_TYPE):
        att = _cosign_attestations(client, subject)
        if att is not None and att.digest not in {r.digest for r in refs}:
            refs.append(att)
            via = "cosign" if via == "none" else f"{via}+cosign"
    return Discovery(subject, tuple(refs), via, tuple(warnings))


def _cosign_attestations(client: RegistryClient, subject: str) -> Referrer | None:
    """cosign's own tag for attestations (``sha256-<hex>.att``, a manifest whose layers are
    DSSE envelopes), which cosign writes unless told to use OCI 1.1 referrers."""
    repo = client.ref.repository
    tag = fallback_tag(subject) + ".att"
    try:
        resp = client.request(
            "GET", f"/v2/{repo}/manifests/{tag}", what=f"cosign attestations {repo}:{tag}",
            headers={"Accept": f"{MANIFEST_TYPE}, {DOCKER_MANIFEST_TYPE}"}, stream=True,
            not_found=_missing,
        )
    except _Missing:
        return None
    ctype = resp.headers.get("Content-Type", "").split(";")[0].strip() or MANIFEST_TYPE
    body = _read(client, resp, f"cosign attestations {repo}:{tag}")
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return Referrer(digest=digest, media_type=ctype, artifact_type=DSSE_TYPE, size=len(body),
                    subject=subject, annotations={"gpusbom.cosign.tag": tag})


def _read(client: RegistryClient, resp: Any, what: str, cap: int = MAX_INDEX_BYTES) -> bytes:
    buf = bytearray()
    try:
        for chunk in resp.iter_content(64 << 10):
            buf += chunk
            if len(buf) > cap:
                raise ImageFormatError(
                    f"{client.label}: {what} is larger than the {cap} bytes allowed")
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - requests / urllib3 errors mid-body
        raise ImageFormatError(f"{client.label}: {what}: the connection broke ({e})") from None
    finally:
        resp.close()
    return bytes(buf)


def _parse_index(body: bytes, subject: str, artifact_type: str | None,
                 where: str) -> tuple[list[Referrer], list[str]]:
    try:
        doc = loads_json(body, max_bytes=MAX_INDEX_BYTES)
    except ValueError as e:
        raise ImageFormatError(f"{where}: not JSON ({str(e)[:120]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("manifests"), list):
        raise ImageFormatError(f"{where}: not an image index (no 'manifests' list)")
    out: list[Referrer] = []
    warnings: list[str] = []
    for i, d in enumerate(doc["manifests"]):
        if not isinstance(d, dict):
            warnings.append(f"{where}: manifests[{i}] is not an object; skipped")
            continue
        digest, mt = d.get("digest"), d.get("mediaType")
        if not isinstance(digest, str) or not DIGEST_RE.match(digest):
            warnings.append(f"{where}: manifests[{i}] has no valid digest; skipped")
            continue
        at = d.get("artifactType") if isinstance(d.get("artifactType"), str) else None
        if artifact_type is not None and at != artifact_type:
            continue
        if len(out) >= MAX_REFERRERS:
            warnings.append(f"{where}: more than {MAX_REFERRERS} referrers; the rest not read")
            break
        ann = d.get("annotations")
        annotations = {str(k)[:200]: str(v)[:1000] for k, v in list(ann.items())[:64]} \
            if isinstance(ann, dict) else {}
        size = d.get("size")
        out.append(Referrer(
            digest=digest, media_type=mt if isinstance(mt, str) else MANIFEST_TYPE,
            artifact_type=at, size=size if isinstance(size, int) and size >= 0 else None,
            subject=subject, annotations=annotations,
        ))
    return out, warnings


# --------------------------------------------------------------------------- fetch


@dataclass
class Budget:
    """Bytes of attached blobs still allowed to be read (for one image, every referrer)."""

    left: int = MAX_TOTAL_BYTES


def fetch(client: RegistryClient, referrer: Referrer, *,
          budget: Budget | None = None) -> list[Attachment]:
    """The documents of one referrer, classified; ``InputError`` (one line) when its
    manifest or a layer is missing, too large (a layer over ``MAX_ATTACHMENT_BYTES``, or
    over what ``budget`` has left), fails its digest or is malformed."""
    where = f"{client.label}: referrer {referrer.digest}"
    budget = budget or Budget()
    if referrer.size is not None and referrer.size > MAX_INDEX_BYTES:
        raise ImageFormatError(f"{where}: manifest of {referrer.size} bytes is too large")
    body, _ctype, _digest = client.get_manifest(referrer.digest)  # digest-checked
    try:
        doc = loads_json(body, max_bytes=MAX_INDEX_BYTES)
    except ValueError as e:
        raise ImageFormatError(f"{where}: manifest is not JSON ({str(e)[:120]})") from None
    if not isinstance(doc, dict):
        raise ImageFormatError(f"{where}: manifest is not a JSON object")
    subj = doc.get("subject")
    if isinstance(subj, dict) and subj.get("digest") not in (None, referrer.subject):
        raise ImageFormatError(
            f"{where}: its subject {str(subj.get('digest'))[:80]} is not {referrer.subject}")
    layers = doc.get("layers") if isinstance(doc.get("layers"), list) else doc.get("blobs")
    if not isinstance(layers, list) or not layers:
        raise ImageFormatError(f"{where}: manifest lists no layers")
    out: list[Attachment] = []
    for i, layer in enumerate(layers[:MAX_LAYERS]):
        if not isinstance(layer, dict):
            raise ImageFormatError(f"{where}: layers[{i}] is not an object")
        digest, size = layer.get("digest"), layer.get("size")
        if not isinstance(digest, str) or not DIGEST_RE.match(digest):
            raise ImageFormatError(f"{where}: layers[{i}] has no valid digest")
        mt = layer.get("mediaType") if isinstance(layer.get("mediaType"), str) else ""
        if mt == "application/vnd.oci.empty.v1+json" or size == 2 and digest == _EMPTY:
            continue
        cap = min(MAX_ATTACHMENT_BYTES, budget.left)
        if isinstance(size, int) and size > cap:
            raise ImageFormatError(
                f"{where}: layer {digest} of {size} bytes is larger than the {cap} bytes "
                "left for attached documents")
        data = _read(client, client.open_blob(digest, f"attachment {digest}"),
                     f"attachment {digest}", cap)
        budget.left -= len(data)
        got = "sha256:" + hashlib.sha256(data).hexdigest()
        if got != digest:
            raise DigestMismatchError(f"{where}: layer {digest}: digest mismatch (got {got})")
        found = classify(data, f"{where}: layer {digest}", subjects=(referrer.subject,))
        if found is not None:
            kind, fmt, document, ptype = found
            out.append(Attachment(kind, fmt, document, referrer, digest, ptype))
    return out


_EMPTY = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


def classify(data: bytes, where: str, *, subjects: Iterable[str] = (),
             _depth: int = 0) -> tuple[str, str, bytes, str | None] | None:
    """(kind, format, document, predicate type) of an attached document, None when it is
    none gpusbom reads (a signature, a tarball); ``InputError`` when it claims a format and
    breaks it."""
    head = data[:512].lstrip()
    if head.startswith(b"<"):
        return ("sbom", "cyclonedx", data, None) if b"cyclonedx" in data[:4096] else None
    if head.startswith(b"SPDXVersion:"):
        return "sbom", "spdx", data, None
    if not head.startswith(b"{"):
        return None
    try:
        doc = loads_json(data, max_bytes=MAX_ATTACHMENT_BYTES)
    except ValueError as e:
        raise ImageFormatError(f"{where}: not valid JSON ({str(e)[:120]})") from None
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("dsseEnvelope"), dict):  # a Sigstore bundle
        doc = doc["dsseEnvelope"]
    if "payloadType" in doc and "payload" in doc:
        if _depth:
            raise ImageFormatError(f"{where}: DSSE envelope nested in another")
        return _dsse(doc, where, subjects)
    if str(doc.get("_type", "")).startswith("https://in-toto.io/Statement"):
        return _statement(doc, where, subjects)
    return _plain(doc, data)


def _plain(doc: dict[str, Any], data: bytes) -> tuple[str, str, bytes, str | None] | None:
    context = doc.get("@context")
    if isinstance(context, str) and "openvex" in context:
        return "vex", "openvex", data, None
    if doc.get("bomFormat") == "CycloneDX":
        vulns = doc.get("vulnerabilities")
        has_analysis = isinstance(vulns, list) and any(
            isinstance(v, dict) and isinstance(v.get("analysis"), dict) for v in vulns)
        if has_analysis and not doc.get("components"):
            return "vex", "cyclonedx", data, None
        return "sbom", "cyclonedx", data, None
    if isinstance(doc.get("spdxVersion"), str):
        return "sbom", "spdx", data, None
    return None


def _dsse(env: dict[str, Any], where: str,
          subjects: Iterable[str]) -> tuple[str, str, bytes, str | None] | None:
    ptype, payload = env.get("payloadType"), env.get("payload")
    if ptype != INTOTO_PAYLOAD:
        return None  # a DSSE envelope of something else
    if not isinstance(payload, str):
        raise ImageFormatError(f"{where}: DSSE payload is not a string")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.b64decode(payload + "=" * (-len(payload) % 4), altchars=b"-_",
                                   validate=True)
        except (binascii.Error, ValueError):
            raise ImageFormatError(f"{where}: DSSE payload is not base64") from None
    try:
        stmt = loads_json(raw, max_bytes=MAX_ATTACHMENT_BYTES)
    except ValueError as e:
        raise ImageFormatError(f"{where}: DSSE payload is not JSON ({str(e)[:120]})") from None
    if not isinstance(stmt, dict):
        raise ImageFormatError(f"{where}: DSSE payload is not an in-toto Statement")
    return _statement(stmt, where, subjects)


def _statement(stmt: dict[str, Any], where: str,
               subjects: Iterable[str]) -> tuple[str, str, bytes, str | None] | None:
    import json

    ptype = stmt.get("predicateType")
    if not isinstance(ptype, str) or not ptype:
        raise ImageFormatError(f"{where}: in-toto Statement has no predicateType")
    named = _statement_digests(stmt.get("subject"), where)
    want = {s.partition(":")[2] for s in subjects}
    if named and want and not (named & want):
        raise ImageFormatError(
            f"{where}: in-toto Statement is about {sorted(named)[0][:16]}..., not this image")
    pred = stmt.get("predicate")
    low = ptype.lower()
    if isinstance(pred, str) and pred.lstrip().startswith(("{", "<", "SPDXVersion:")):
        body = pred.encode("utf-8")  # some tools embed the document as a string
    elif isinstance(pred, dict):
        body = json.dumps(pred, separators=(",", ":")).encode()
    else:
        return "attestation", "in-toto", b"", ptype
    if "openvex" in low or "/vex" in low:
        kind_fmt: tuple[str, str] | None = ("vex", "openvex")
    elif "cyclonedx" in low:
        kind_fmt = None
    elif "spdx" in low:
        kind_fmt = ("sbom", "spdx")
    else:
        return "attestation", "in-toto", b"", ptype
    inner = classify(body, where, subjects=subjects, _depth=1)
    if inner is None:
        raise ImageFormatError(f"{where}: predicate of type {ptype[:120]} is not the document "
                               "its type names")
    if kind_fmt is not None and inner[1] != kind_fmt[1]:
        raise ImageFormatError(f"{where}: predicate of type {ptype[:120]} holds {inner[1]}")
    return inner[0], inner[1], inner[2], ptype


def _statement_digests(subject: Any, where: str) -> set[str]:
    if subject is None:
        return set()
    if not isinstance(subject, list):
        raise ImageFormatError(f"{where}: in-toto Statement subject is not a list")
    out = set()
    for s in subject[:256]:
        d = s.get("digest") if isinstance(s, dict) else None
        if isinstance(d, dict) and isinstance(d.get("sha256"), str):
            out.add(d["sha256"].lower())
    return out


# --------------------------------------------------------------------------- both


def read_attachments(client: RegistryClient, subjects: Iterable[str]) -> Attachments:
    """Discover and fetch the attachments of every manifest in ``subjects`` (the image's
    manifest and its index); a referrer that cannot be read is one warning, never an error."""
    out = Attachments(registry=client.ref.registry)
    seen: set[str] = set()
    budget = Budget()
    for subject in subjects:
        try:
            found = discover(client, subject)
        except InputError as e:
            out.warnings.append(f"attachments of {subject} not read: {_line(e)}")
            continue
        out.discovered.append(found)
        out.warnings.extend(found.warnings)
        for ref in found.referrers:
            if ref.digest in seen:
                continue
            if len(seen) >= MAX_REFERRERS:
                out.warnings.append(f"more than {MAX_REFERRERS} referrers; the rest not read")
                break
            seen.add(ref.digest)
            try:
                out.items.extend(fetch(client, ref, budget=budget))
            except InputError as e:
                out.warnings.append(f"attachment {ref.digest} ignored: {_line(e)}")
    for w in out.warnings:
        log.warning("gpusbom: warning: %s", w)
    return out


def _line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:400]
