"""Attestations as OCI 1.1 referrers of the image they are about: push and discover.

Each statement is one artifact manifest (an image manifest with ``artifactType``, the
empty config ``application/vnd.oci.empty.v1+json`` and one layer holding the statement or
its Sigstore bundle) whose ``subject`` is the image manifest. A registry with the
referrers API answers the manifest PUT with an ``OCI-Subject`` header and lists the
artifact under ``/v2/<repo>/referrers/<digest>``. A registry without it (Docker
Distribution 2.8, Debian's ``docker-registry``) gets the referrers tag schema of the OCI
distribution spec 1.1: an image index tagged ``sha256-<hex of the subject>`` that lists
every referrer, read, extended and written back by the client. Discovery tries the API
first and falls back to that tag on a 404, as the spec says.

Everything read from the registry is hostile: manifests are capped (``MAX_JSON_BYTES``),
parsed with ``safetext.loads_json`` and checked against their digest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import ImageFormatError, SourceNotFoundError
from ..safetext import loads_json
from ..sources.image import sha256_digest
from ..sources.registry import ImageRef, RegistryClient, RegistryError, RegistryOptions
from .statement import PAYLOAD_TYPE, Statement

__all__ = ["ARTIFACT_TYPE", "BUNDLE_TYPE", "Pushed", "Referrer", "discover", "push_statements"]

EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
#: the artifact type of an unsigned statement (the layer holds the Statement JSON)
ARTIFACT_TYPE = PAYLOAD_TYPE
#: a signed one (the layer holds a Sigstore bundle with the DSSE envelope, as cosign v3)
BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"
_ACCEPT_MANIFEST = ", ".join((MANIFEST_TYPE, INDEX_TYPE,
                              "application/vnd.docker.distribution.manifest.v2+json",
                              "application/vnd.docker.distribution.manifest.list.v2+json"))
#: referrers listed at most (a hostile index could name millions)
MAX_REFERRERS = 10_000


@dataclass(frozen=True)
class Pushed:
    """One stored attestation: its manifest digest and how the registry indexes it."""

    digest: str
    predicate_type: str
    artifact_type: str
    via: str  # referrers-api | tag-schema


@dataclass(frozen=True)
class Referrer:
    digest: str
    artifact_type: str | None
    annotations: dict[str, str]
    size: int

    @property
    def predicate_type(self) -> str | None:
        return self.annotations.get(PREDICATE_ANNOTATION)


def _json(data: bytes, what: str) -> Any:
    try:
        return loads_json(data)
    except ValueError as e:
        raise ImageFormatError(f"{what}: not JSON ({str(e)[:120]})") from None


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _path_of(location: str) -> str:
    parts = urlsplit(location)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _upload(client: RegistryClient, data: bytes, media_type: str) -> dict[str, Any]:
    repo = client.ref.repository
    digest = sha256_digest(data)
    head = client.request("HEAD", f"/v2/{repo}/blobs/{digest}", what=f"blob {digest}",
                          ok=(200, 404))
    head.close()
    if head.status_code != 200:
        start = client.request("POST", f"/v2/{repo}/blobs/uploads/", what="blob upload",
                               ok=(202,))
        start.close()
        location = start.headers.get("Location")
        if not location:
            raise RegistryError(f"{client.label}: blob upload: no Location in the answer")
        path = _path_of(location)
        sep = "&" if "?" in path else "?"
        client.request("PUT", f"{path}{sep}digest={digest}", what=f"blob {digest}",
                       headers={"Content-Type": "application/octet-stream"}, data=data,
                       ok=(201, 204)).close()
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def _subject(client: RegistryClient, digest: str) -> dict[str, Any]:
    body, media_type, got = client.get_manifest(digest)
    return {"mediaType": media_type or MANIFEST_TYPE, "digest": got, "size": len(body)}


def _put_manifest(client: RegistryClient, reference: str, body: bytes, media_type: str) -> str:
    """PUT a manifest; the ``OCI-Subject`` header it answers with, or ''."""
    resp = client.request("PUT", f"/v2/{client.ref.repository}/manifests/{reference}",
                          what=f"manifest {reference}", headers={"Content-Type": media_type},
                          data=body, ok=(201, 202))
    resp.close()
    return resp.headers.get("OCI-Subject", "")


def _fallback_tag(digest: str) -> str:
    algo, _, hexpart = digest.partition(":")
    return f"{algo}-{hexpart}"[:128]


def _tag_index(client: RegistryClient, subject_digest: str) -> dict[str, Any]:
    """The referrers index under the fallback tag (an empty one when there is none yet)."""
    try:
        body, _, _ = client.get_manifest(_fallback_tag(subject_digest))
    except SourceNotFoundError:
        return {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": []}
    doc = _json(body, f"{client.label}: referrers index of {subject_digest}")
    if not isinstance(doc, dict) or not isinstance(doc.get("manifests"), list):
        raise ImageFormatError(f"{client.label}: tag {_fallback_tag(subject_digest)} is not an "
                               "image index (the referrers tag schema needs one)")
    return doc


def push_statements(image: str, statements: list[Statement], opts: RegistryOptions,
                    bundles: list[bytes] | None = None) -> list[Pushed]:
    """Store ``statements`` (or, when given, their Sigstore ``bundles``) as referrers of
    their subject in ``image``'s repository. The subject must be the manifest digest the
    registry holds (``gpusbom attest`` scans ``registry:IMAGE`` for it)."""
    client = RegistryClient(ImageRef.parse(image), opts)
    try:
        empty = _upload(client, EMPTY, EMPTY_TYPE)
        out: list[Pushed] = []
        subjects: dict[str, dict[str, Any]] = {}
        fallback: dict[str, list[dict[str, Any]]] = {}
        for i, st in enumerate(statements):
            sd = st.subject.digest
            if sd not in subjects:
                subjects[sd] = _subject(client, sd)
            if bundles is not None:
                layer_type = artifact_type = BUNDLE_TYPE
                blob = bundles[i]
            else:
                layer_type = artifact_type = ARTIFACT_TYPE
                blob = st.to_json()
            layer = _upload(client, blob, layer_type)
            annotations = {PREDICATE_ANNOTATION: st.predicate_type,
                           "dev.sigstore.bundle.predicateType": st.predicate_type}
            layer["annotations"] = {PREDICATE_ANNOTATION: st.predicate_type}
            manifest = {"schemaVersion": 2, "mediaType": MANIFEST_TYPE,
                        "artifactType": artifact_type, "config": empty, "layers": [layer],
                        "subject": subjects[sd], "annotations": annotations}
            body = _dumps(manifest)
            digest = sha256_digest(body)
            answered = _put_manifest(client, digest, body, MANIFEST_TYPE)
            via = "referrers-api" if answered == sd else "tag-schema"
            if via == "tag-schema":
                fallback.setdefault(sd, []).append(
                    {"mediaType": MANIFEST_TYPE, "digest": digest, "size": len(body),
                     "artifactType": artifact_type, "annotations": annotations})
            out.append(Pushed(digest, st.predicate_type, artifact_type, via))
        for sd, descriptors in fallback.items():
            index = _tag_index(client, sd)
            have = {m.get("digest") for m in index["manifests"] if isinstance(m, dict)}
            index["manifests"] += [d for d in descriptors if d["digest"] not in have]
            _put_manifest(client, _fallback_tag(sd), _dumps(index), INDEX_TYPE)
        return out
    finally:
        client.close()


def _referrers(doc: Any, what: str) -> list[Referrer]:
    if not isinstance(doc, dict) or not isinstance(doc.get("manifests"), list):
        raise ImageFormatError(f"{what}: not an image index")
    out = []
    for m in doc["manifests"][:MAX_REFERRERS]:
        if not isinstance(m, dict) or not isinstance(m.get("digest"), str):
            continue
        ann = m.get("annotations")
        annotations = {str(k): str(v) for k, v in ann.items()} if isinstance(ann, dict) else {}
        at = m.get("artifactType")
        size = m.get("size")
        out.append(Referrer(m["digest"], at if isinstance(at, str) else None, annotations,
                            size if isinstance(size, int) else 0))
    return out


def discover(image: str, subject_digest: str, opts: RegistryOptions,
             artifact_type: str | None = None) -> tuple[list[Referrer], str]:
    """The referrers of ``subject_digest`` in ``image``'s repository, and how they were
    found (``referrers-api`` or ``tag-schema``)."""
    client = RegistryClient(ImageRef.parse(image), opts)
    repo = client.ref.repository
    what = f"{client.label}: referrers of {repo}@{subject_digest}"
    try:
        resp = client.request("GET", f"/v2/{repo}/referrers/{subject_digest}", what=what,
                              headers={"Accept": INDEX_TYPE}, stream=True, ok=(200, 404))
        if resp.status_code == 200:
            found = _referrers(_json(client.read_capped(resp, what), what), what)
            via = "referrers-api"
        else:
            resp.close()
            found = _referrers(_tag_index(client, subject_digest), what)
            via = "tag-schema"
    finally:
        client.close()
    if artifact_type:
        found = [r for r in found if r.artifact_type == artifact_type]
    return found, via


def fetch_statement(image: str, referrer: str, opts: RegistryOptions) -> dict[str, Any]:
    """The statement (or bundle) a referrer manifest holds, digest-checked."""
    client = RegistryClient(ImageRef.parse(image), opts)
    try:
        body, _, _ = client.get_manifest(referrer)
        what = f"{client.label}: attestation {referrer}"
        doc = _json(body, what)
        layers = doc.get("layers") if isinstance(doc, dict) else None
        if not isinstance(layers, list) or not layers or not isinstance(layers[0], dict) \
                or not isinstance(layers[0].get("digest"), str):
            raise ImageFormatError(f"{what}: not an attestation manifest (no layer)")
        blob = client.get_blob_small(layers[0]["digest"], what)
        if sha256_digest(blob) != layers[0]["digest"]:
            raise ImageFormatError(f"{what}: the layer's digest does not match its content")
        data = _json(blob, what)
        if not isinstance(data, dict):
            raise ImageFormatError(f"{what}: the layer is not a JSON object")
        return data
    finally:
        client.close()
