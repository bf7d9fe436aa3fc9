"""in-toto Statements v1 about a scanned image, and the DSSE envelopes that carry them.

A Statement binds a predicate to its subject by digest (in-toto attestation framework,
``spec/v1/statement.md``). The subject of every gpusbom statement is the image:
``name`` is its repository (or gpusbom's name for it), ``digest`` the manifest digest when
the source has one (what a registry, cosign and the OCI referrers API key on), else the
image ID (config digest, e.g. a ``docker save`` archive). Which one it is goes to the
``gpusbom:digest`` annotation, so a consumer need not guess.

The Bundle (``spec/v1/bundle.md``) is JSON Lines, one DSSE envelope per line; gpusbom
writes them unsigned (``signatures: []``): signing is the signer's job (``attest.sign``).
Serialisation is deterministic: sorted keys, no spaces, UTF-8.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..identity import image_identity, split_repository
from ..model import Target

__all__ = [
    "PAYLOAD_TYPE",
    "STATEMENT_TYPE",
    "Statement",
    "Subject",
    "bundle_lines",
    "envelope",
    "subject_of",
]

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: DSSE payloadType of an in-toto Statement (spec/v1/envelope.md)
PAYLOAD_TYPE = "application/vnd.in-toto+json"

_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


@dataclass(frozen=True)
class Subject:
    """The image a statement is about."""

    name: str
    digest: str  # sha256:<hex>
    kind: str  # manifest | config
    uri: str | None = None  # its purl

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "digest": {"sha256": self.digest.split(":", 1)[1]},
                             "annotations": {"gpusbom:digest": self.kind}}
        if self.uri:
            d["uri"] = self.uri
        return d


def subject_of(target: Target) -> Subject:
    """The statement subject of a scanned image; a target without a digest (a directory,
    a host, an SBOM that names none) cannot be the subject of an attestation."""
    digest, kind = None, "manifest"
    if target.manifest_digest and _DIGEST.fullmatch(target.manifest_digest):
        digest = target.manifest_digest
    elif target.image_id and _DIGEST.fullmatch(target.image_id):
        digest, kind = target.image_id, "config"
    if target.kind != "image" or digest is None:
        raise UsageError(
            f"{target.reference or target.kind}: an attestation needs an image with a sha256 "
            "digest as its subject (a directory or host scan has none)")
    ident = image_identity(target)
    name = ident.name
    repo = target.name or next((t for t in target.tags if "/" in t or ":" in t), None)
    if repo:
        registry, path = split_repository(repo)
        path = path.split("@", 1)[0]
        if ":" in path.rsplit("/", 1)[-1]:
            path = path.rsplit(":", 1)[0]
        name = f"{registry}/{path}" if registry else path
    return Subject(name=name, digest=digest, kind=kind, uri=ident.purl)


@dataclass(frozen=True)
class Statement:
    subject: Subject
    predicate_type: str
    predicate: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"_type": STATEMENT_TYPE, "subject": [self.subject.to_dict()],
                "predicateType": self.predicate_type, "predicate": self.predicate}

    def to_json(self) -> bytes:
        """The canonical bytes (the DSSE payload, the OCI blob)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")


def envelope(payload: bytes, signatures: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A DSSE envelope of ``payload`` (an unsigned one without ``signatures``)."""
    return {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": list(signatures or [])}


def bundle_lines(statements: list[Statement]) -> str:
    """An in-toto Bundle (``.intoto.jsonl``): one unsigned envelope per line."""
    return "".join(json.dumps(envelope(s.to_json()), sort_keys=True, separators=(",", ":")) + "\n"
                   for s in statements)
