"""A small OCI 1.1 attacher for the tests: push a document as an artifact manifest whose
``subject`` is an image, and keep the referrers tag schema's index (``sha256-<hex>``) up to
date, as ``oras attach`` does against a registry without the referrers API (Debian's
docker-registry 2.8).

Why not ``oras`` itself: the Go CLI is not packaged in Debian 12 or on PyPI, and the PyPI
``oras`` SDK (0.2.43) writes ``subject`` but never the tag-schema index, which is the only
way a 2.8 registry can list referrers. This speaks the distribution API with ``requests``
(monolithic blob upload, manifest PUT), with the bearer-token flow for the token registry.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import requests

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Pusher:
    def __init__(self, base: str, repo: str, creds: tuple[str, str] | None = None,
                 verify: Any = False) -> None:
        self.base, self.repo, self.creds = base, repo, creds
        self.s = requests.Session()
        self.verify = verify  # per request: a REQUESTS_CA_BUNDLE in the environment wins
        # over Session.verify (requests' merge_environment_settings)
        self.token: str | None = None

    def _req(self, method: str, url: str, **kw: Any) -> requests.Response:
        if url.startswith("/"):
            url = self.base + url
        for _ in range(2):
            h = dict(kw.pop("headers", {}) or {})
            if self.token:
                h["Authorization"] = self.token
            r = self.s.request(method, url, headers=h, timeout=60, verify=self.verify, **kw)
            kw["headers"] = {k: v for k, v in h.items() if k != "Authorization"}
            if r.status_code != 401:
                return r
            self._auth(r.headers.get("WWW-Authenticate", ""))
        return r

    def _auth(self, challenge: str) -> None:
        scheme, _, rest = challenge.partition(" ")
        params = dict(p.split("=", 1) for p in rest.split(",") if "=" in p)
        params = {k.strip(): v.strip().strip('"') for k, v in params.items()}
        if scheme.lower() == "basic":
            assert self.creds
            raw = f"{self.creds[0]}:{self.creds[1]}".encode()
            self.token = "Basic " + base64.b64encode(raw).decode()
            return
        q = {"service": params.get("service", ""),
             "scope": f"repository:{self.repo}:pull,push"}
        r = self.s.get(params["realm"], params=q, auth=self.creds, timeout=30)
        r.raise_for_status()
        self.token = "Bearer " + r.json()["token"]

    def blob(self, data: bytes, media_type: str) -> dict[str, Any]:
        d = sha(data)
        r = self._req("POST", f"/v2/{self.repo}/blobs/uploads/")
        assert r.status_code == 202, (r.status_code, r.text)
        loc = r.headers["Location"]
        r = self._req("PUT", loc + ("&" if "?" in loc else "?") + "digest=" + d, data=data,
                      headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, (r.status_code, r.text)
        return {"mediaType": media_type, "digest": d, "size": len(data)}

    def manifest(self, ref: str, body: bytes, media_type: str) -> None:
        r = self._req("PUT", f"/v2/{self.repo}/manifests/{ref}", data=body,
                      headers={"Content-Type": media_type})
        assert r.status_code == 201, (r.status_code, r.text)

    def get_manifest(self, ref: str, accept: str) -> tuple[bytes, str] | None:
        r = self._req("GET", f"/v2/{self.repo}/manifests/{ref}", headers={"Accept": accept})
        if r.status_code == 404:
            return None
        assert r.status_code == 200, (r.status_code, r.text)
        return r.content, r.headers.get("Content-Type", "")

    def attach(self, subject: str, artifact_type: str, data: bytes, layer_type: str, *,
               annotations: dict[str, str] | None = None, index: bool = True) -> str:
        """Attach ``data`` to the manifest ``subject``; returns the artifact manifest digest."""
        got = self.get_manifest(subject, f"{MANIFEST}, {INDEX}")
        assert got is not None, subject
        body, ctype = got
        config = self.blob(b"{}", EMPTY)
        layer = self.blob(data, layer_type)
        art: dict[str, Any] = {
            "schemaVersion": 2, "mediaType": MANIFEST, "artifactType": artifact_type,
            "config": config, "layers": [layer],
            "subject": {"mediaType": ctype.split(";")[0] or MANIFEST, "digest": subject,
                        "size": len(body)},
        }
        if annotations:
            art["annotations"] = annotations
        ab = json.dumps(art, indent=1).encode()
        digest = sha(ab)
        self.manifest(digest, ab, MANIFEST)
        if index:
            self.add_to_index(subject, {"mediaType": MANIFEST, "digest": digest,
                                        "size": len(ab), "artifactType": artifact_type,
                                        **({"annotations": annotations} if annotations else {})})
        return digest

    def add_to_index(self, subject: str, desc: dict[str, Any]) -> None:
        tag = subject.replace(":", "-", 1)
        got = self.get_manifest(tag, INDEX)
        idx = json.loads(got[0]) if got else {"schemaVersion": 2, "mediaType": INDEX,
                                              "manifests": []}
        idx["manifests"].append(desc)
        self.manifest(tag, json.dumps(idx).encode(), INDEX)

    def put_index(self, subject: str, body: bytes) -> None:
        """Replace the tag-schema index with raw bytes (hostile-input tests)."""
        self.manifest(subject.replace(":", "-", 1), body, INDEX)


    def cosign_att(self, subject: str, envelopes: list[bytes], predicate_type: str) -> str:
        """Attestations the way cosign stores them without OCI 1.1 referrers: a manifest (no
        ``subject``) tagged ``sha256-<hex>.att`` whose layers are DSSE envelopes."""
        config = self.blob(b"{}", "application/vnd.oci.image.config.v1+json")
        layers = [dict(self.blob(e, "application/vnd.dsse.envelope.v1+json"),
                       annotations={"predicateType": predicate_type}) for e in envelopes]
        body = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST, "config": config,
                           "layers": layers}).encode()
        self.manifest(subject.replace(":", "-", 1) + ".att", body, MANIFEST)
        return sha(body)


def dsse(statement: dict[str, Any]) -> bytes:
    """An unsigned DSSE envelope of an in-toto Statement (signatures are not checked)."""
    payload = base64.b64encode(json.dumps(statement).encode()).decode()
    return json.dumps({"payloadType": "application/vnd.in-toto+json", "payload": payload,
                       "signatures": [{"keyid": "", "sig": "MEUCIQ=="}]}).encode()
