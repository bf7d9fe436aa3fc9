"""``gpusbom attest``: scan an image, build its attestations, and store or sign them.

One scan gives the SBOM statements (CycloneDX, SPDX). ``policy``: the same scan is gated
and the decision attested (verification summary). ``probe``: the GPU smoke tests run on
this machine and their results are attested about the image (run it inside a container of
the image, where the probes load the image's own runtime libraries). ``push``: the
statements become OCI referrers of the image (``attest.oci``), unsigned or as the Sigstore
bundles ``sign="sigstore"`` made; ``sign="cosign"`` hands each predicate to ``cosign
attest``, which signs and stores it itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError
from ..model import ScanResult
from ..sources.registry import RegistryOptions
from .oci import Pushed, push_statements
from .predicates import gate_statements, probe_statement, sbom_statements
from .statement import Statement

__all__ = ["AttestOutcome", "AttestRequest", "run_attest"]

_SBOMS = ("cyclonedx", "spdx")


@dataclass(frozen=True)
class AttestRequest:
    image: str
    sboms: tuple[str, ...] = _SBOMS
    policy: str | None = None
    probe: bool = False
    probe_timeout: float = 20.0
    push: bool = False
    sign: str = "none"  # none | cosign | sigstore
    key: str | None = None  # cosign --key
    platform: str | None = None
    registry: RegistryOptions | None = None


@dataclass
class AttestOutcome:
    result: ScanResult
    statements: list[Statement]
    pushed: list[Pushed] = field(default_factory=list)
    cosign: list[str] = field(default_factory=list)
    gate_passed: bool | None = None


def _registry_ref(image: str) -> str:
    ref = image.removeprefix("registry:")
    if ref.startswith(("docker:", "docker-archive:", "oci:", "oci-archive:", "dir:", "sif:",
                       "containerd:", "podman:")):
        raise UsageError(f"{image}: --push and --sign store attestations in a registry; give "
                         "the image's registry reference (registry:HOST/REPO:TAG)")
    return ref


def run_attest(req: AttestRequest) -> AttestOutcome:
    from ..pipeline import HostOptions, ProbeOptions, ScanRequest, scan

    bad = [s for s in req.sboms if s not in _SBOMS]
    if bad:
        raise UsageError(f"--sbom-format {bad[0]}: choose from {', '.join(_SBOMS)}")
    if req.sign != "none":
        from .sign import require

        require(req.sign)  # before the scan: a missing signer fails fast
    stored = req.push or req.sign != "none"
    ref = _registry_ref(req.image) if stored else req.image
    scan_ref = f"registry:{ref}" if stored else req.image
    result = scan(ScanRequest(reference=scan_ref, platform=req.platform, registry=req.registry))
    statements = sbom_statements(result, formats=req.sboms)
    outcome = AttestOutcome(result, statements)
    if req.policy is not None:
        from ..policy import evaluate, load_policy
        from ..policy.report import GateReport

        pol = load_policy(req.policy)
        decision = evaluate(pol, result, target=req.image)
        statements += gate_statements(GateReport(pol, [decision], [(req.image, result)]))
        outcome.gate_passed = decision.passed
    if req.probe:
        host = scan(ScanRequest(host=HostOptions(root="/"),
                                probe=ProbeOptions(timeout=req.probe_timeout)))
        host.target = result.target  # the probes' subject is the image they ran for
        probed = probe_statement(host)
        if probed is not None:
            statements.append(probed)
    if req.sign == "cosign":
        from .sign import cosign_attest

        outcome.cosign = cosign_attest(ref, statements, key=req.key)
        return outcome
    bundles = None
    if req.sign == "sigstore":
        from .sign import sigstore_bundles

        bundles = sigstore_bundles(statements)
    if req.push:
        outcome.pushed = push_statements(ref, statements, req.registry or RegistryOptions(),
                                         bundles)
    return outcome
