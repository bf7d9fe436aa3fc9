"""Signing, delegated: gpusbom holds no keys and talks to no transparency log itself.

``cosign`` (on ``PATH``): ``cosign attest --predicate FILE --type URI IMAGE@DIGEST`` signs
each predicate and stores it in the registry itself (cosign v3: a Sigstore bundle as an
OCI referrer); gpusbom passes ``--key`` through when given, else cosign's keyless flow runs.
``sigstore`` (the ``sigstore`` Python package, ``pip install sigstore``): each Statement is
signed as DSSE with an ambient OIDC identity (CI) and comes back as a Sigstore bundle,
which ``attest.oci`` pushes as the referrer instead of the bare statement.

Neither is required: ``detect`` says which is there, and asking for a missing one is a
usage error naming what to install. ``verify_bundle`` checks a Sigstore bundle offline
(``sigstore``'s verifier with the trust root it has cached, no network), where installed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

from ..errors import InputError, UsageError
from .statement import Statement

__all__ = ["SIGNERS", "cosign_attest", "detect", "require", "sigstore_bundles", "verify_bundle"]

SIGNERS = ("cosign", "sigstore")
#: cosign's --type for the predicate types it knows by name
_COSIGN_TYPES = {"https://cyclonedx.org/bom": "cyclonedx", "https://spdx.dev/Document": "spdxjson"}


def detect() -> dict[str, bool]:
    """Which signers this machine has."""
    return {"cosign": shutil.which("cosign") is not None,
            "sigstore": importlib.util.find_spec("sigstore") is not None}


def require(signer: str) -> None:
    """Usage error unless ``signer`` is one gpusbom knows and is installed here."""
    if signer not in SIGNERS:
        raise UsageError(f"--sign {signer}: choose one of: none, {', '.join(SIGNERS)}")
    if not detect()[signer]:
        hint = ("install cosign (https://docs.sigstore.dev) and put it on PATH"
                if signer == "cosign" else "pip install sigstore")
        raise UsageError(f"--sign {signer}: {signer} is not installed here; {hint}")


def cosign_attest(image: str, statements: Sequence[Statement], key: str | None = None,
                  timeout: float = 300.0) -> list[str]:
    """Run ``cosign attest`` once per statement (cosign pushes); returns the commands run."""
    require("cosign")
    ran: list[str] = []
    repo = image.split("@", 1)[0]
    with tempfile.TemporaryDirectory(prefix="gpusbom-cosign-") as tmp:
        for i, st in enumerate(statements):
            pred = os.path.join(tmp, f"predicate-{i}.json")
            with open(pred, "w", encoding="utf-8") as f:
                import json

                json.dump(st.predicate, f, sort_keys=True)
            cmd = ["cosign", "attest", "--yes", "--predicate", pred,
                   "--type", _COSIGN_TYPES.get(st.predicate_type, st.predicate_type)]
            if key:
                cmd += ["--key", key]
            cmd.append(f"{repo}@{st.subject.digest}")
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,  # noqa: S603
                                  check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:300]
                raise InputError(f"cosign attest {st.predicate_type}: exit {proc.returncode}: "
                                 f"{last}")
            ran.append(" ".join(cmd[:-1] + [cmd[-1]]))
    return ran


def sigstore_bundles(statements: Sequence[Statement]) -> list[bytes]:  # pragma: no cover
    """Sign each statement with sigstore-python 4.x (ambient OIDC identity); the bundles'
    JSON. Needs Sigstore's public services (Fulcio, Rekor), which this project's CI cannot
    reach: untested here, written against sigstore 4.5.1's API."""
    require("sigstore")
    from sigstore import dsse, oidc, sign  # type: ignore[import-not-found,unused-ignore]

    token = oidc.detect_credential()
    if token is None:
        raise UsageError("--sign sigstore: no ambient OIDC credential (run it in CI with an "
                         "identity token, or sign with cosign)")
    ctx: Any = sign.SigningContext.from_trust_config(sign.ClientTrustConfig.production())
    out = []
    with ctx.signer(oidc.IdentityToken(token)) as signer:
        for st in statements:
            bundle = signer.sign_dsse(dsse.Statement(st.to_json()))
            out.append(bundle.to_json().encode())
    return out


def verify_bundle(bundle: bytes, identity: str, issuer: str) -> dict[str, Any]:
    """Verify a Sigstore bundle offline against ``identity``/``issuer``; the in-toto
    Statement it carries. Needs ``sigstore`` (4.x): its ``Verifier.production(offline=True)``
    uses the trust root it ships or has cached, with no network."""
    require("sigstore")
    import json

    from sigstore.models import Bundle  # type: ignore[import-not-found,unused-ignore]
    from sigstore.verify import Verifier, policy  # type: ignore[import-not-found,unused-ignore]

    try:
        parsed: Any = Bundle.from_json(bundle)
        verifier: Any = Verifier.production(offline=True)
        payload_type, payload = verifier.verify_dsse(parsed, policy.Identity(
            identity=identity, issuer=issuer))
    except Exception as e:  # noqa: BLE001 - sigstore raises many kinds; all mean "not verified"
        raise InputError(f"sigstore bundle: not verified: {str(e)[:300]}") from None
    if payload_type != "application/vnd.in-toto+json":
        raise InputError(f"sigstore bundle: payload type {payload_type!r} is not an in-toto "
                         "statement")
    doc: dict[str, Any] = json.loads(payload)
    return doc
