"""``referrers.classify``: what an attached document is, decided from its bytes, with
hostile input refused in one line (``ImageFormatError``) and never a crash."""

from __future__ import annotations

import base64
import json

import pytest

from gpusbom.errors import ImageFormatError
from gpusbom.sources.registry.referrers import classify, fallback_tag

IMG = "sha256:" + "ab" * 32
OPENVEX = {"@context": "https://openvex.dev/ns/v0.2.0", "statements": []}
CDX_SBOM = {"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [{"name": "x"}]}
CDX_VEX = {"bomFormat": "CycloneDX", "specVersion": "1.6",
           "vulnerabilities": [{"id": "CVE-1", "analysis": {"state": "not_affected"}}]}
SPDX = {"spdxVersion": "SPDX-2.3", "packages": []}


def stmt(ptype: str, predicate: object, digest: str = "ab" * 32) -> dict[str, object]:
    return {"_type": "https://in-toto.io/Statement/v1", "predicateType": ptype,
            "subject": [{"name": "img", "digest": {"sha256": digest}}], "predicate": predicate}


def envelope(payload: bytes, ptype: str = "application/vnd.in-toto+json") -> bytes:
    return json.dumps({"payloadType": ptype, "payload": base64.b64encode(payload).decode(),
                       "signatures": []}).encode()


def kind(data: bytes) -> tuple[str, str] | None:
    got = classify(data, "test", subjects=(IMG,))
    return None if got is None else (got[0], got[1])


@pytest.mark.parametrize(("doc", "want"), [
    (OPENVEX, ("vex", "openvex")),
    (CDX_SBOM, ("sbom", "cyclonedx")),
    (CDX_VEX, ("vex", "cyclonedx")),
    (SPDX, ("sbom", "spdx")),
    ({"something": "else"}, None),
    ([1, 2, 3], None),
])  # fmt: skip
def test_plain_documents(doc: object, want: tuple[str, str] | None) -> None:
    assert kind(json.dumps(doc).encode()) == want


def test_text_forms_and_binary() -> None:
    assert kind(b'<?xml version="1.0"?><bom xmlns="http://cyclonedx.org/schema/bom/1.5"/>') \
        == ("sbom", "cyclonedx")
    assert kind(b"SPDXVersion: SPDX-2.3\nDataLicense: CC0-1.0\n") == ("sbom", "spdx")
    assert kind(b"\x1f\x8b\x08\x00garbage") is None  # a tarball: not read
    assert kind(b"") is None


def test_in_toto_forms() -> None:
    st = stmt("https://openvex.dev/ns/v0.2.0", OPENVEX)
    got = classify(envelope(json.dumps(st).encode()), "t", subjects=(IMG,))
    assert got is not None and got[:2] == ("vex", "openvex")
    assert json.loads(got[2]) == OPENVEX and got[3] == "https://openvex.dev/ns/v0.2.0"
    assert kind(json.dumps(stmt("https://cyclonedx.org/bom", CDX_SBOM)).encode()) \
        == ("sbom", "cyclonedx")
    assert kind(json.dumps(stmt("https://spdx.dev/Document", SPDX)).encode()) == ("sbom", "spdx")
    # a Sigstore bundle around the envelope
    bundle = {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
              "dsseEnvelope": json.loads(envelope(json.dumps(st).encode()))}
    assert kind(json.dumps(bundle).encode()) == ("vex", "openvex")
    # provenance: recorded, not read
    assert kind(json.dumps(stmt("https://slsa.dev/provenance/v1", {"x": 1})).encode()) \
        == ("attestation", "in-toto")
    # a DSSE envelope of something that is not in-toto
    assert kind(envelope(b"{}", "text/plain")) is None


@pytest.mark.parametrize(("data", "needle"), [
    (b'{"a": ' + b"[" * 10000 + b"]" * 10000 + b"}", "not valid JSON"),
    (b'{"broken": ', "not valid JSON"),
    (json.dumps({"payloadType": "application/vnd.in-toto+json", "payload": "%%%"}).encode(),
     "not base64"),
    (json.dumps({"payloadType": "application/vnd.in-toto+json", "payload": 5}).encode(),
     "not a string"),
    (envelope(b"[1]"), "not an in-toto Statement"),
    (envelope(b"not json"), "not JSON"),
    (json.dumps({"_type": "https://in-toto.io/Statement/v1", "predicate": {}}).encode(),
     "no predicateType"),
    (json.dumps(stmt("https://openvex.dev/ns/v0.2.0", OPENVEX, "cd" * 32)).encode(),
     "not this image"),
    (json.dumps(stmt("https://openvex.dev/ns/v0.2.0", CDX_SBOM)).encode(), "holds cyclonedx"),
    (json.dumps(stmt("https://spdx.dev/Document", {"no": "spdx"})).encode(),
     "is not the document"),
    (json.dumps(dict(stmt("https://spdx.dev/Document", SPDX), subject="x")).encode(),
     "subject is not a list"),
    (envelope(envelope(b"{}")), "no predicateType"),  # an envelope is no Statement
])  # fmt: skip
def test_hostile_documents_are_one_line(data: bytes, needle: str) -> None:
    with pytest.raises(ImageFormatError) as e:
        classify(data, "registry x: layer y", subjects=(IMG,))
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and msg.startswith("registry x: layer y"), msg


def test_fallback_tag() -> None:
    assert fallback_tag(IMG) == "sha256-" + "ab" * 32
