"""``gpusbom attest``: in-toto attestations about an image (docs/attestations.md).

Writes an in-toto Bundle (``.intoto.jsonl``) of Statements v1 whose subject is the image
digest: the SBOMs, and with ``--policy`` the gate decision, with ``--probe`` this
machine's GPU probe results. ``--push`` stores them as OCI referrers of the image;
``--sign cosign|sigstore`` delegates signing. Exit codes: 0 written (and pushed); 1
``--policy`` given and the gate failed (the attestation, saying FAILED, is still written);
2 usage (a signer that is not installed); 3 input (image, registry).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import scan_options as o
from .._common import EXIT_OK, EXIT_POLICY, exits
from ..app import app


@app.command()
@exits
def attest(
    image: Annotated[str, typer.Argument(help="Image reference (as for scan); with --push or "
                                              "--sign, in a registry.")],
    output: Annotated[str | None, typer.Option(
        "--output", "-o", help="Bundle file (.intoto.jsonl); '-' for stdout. Default: stdout "
        "unless --push.")] = None,
    sbom_format: Annotated[list[str] | None, typer.Option(
        "--sbom-format", help="SBOM predicates: cyclonedx, spdx (repeatable; default both).")
    ] = None,
    policy: Annotated[str | None, typer.Option(
        "--policy", "-p", help="Also gate the image with this policy (file or built-in name) "
        "and attest the decision.")] = None,
    probe: Annotated[bool, typer.Option(
        "--probe", help="Also run the GPU probes on this machine and attest their results "
        "about the image.")] = False,
    probe_timeout: Annotated[float, typer.Option("--probe-timeout")] = 20.0,
    push: Annotated[bool, typer.Option(
        "--push", help="Store the attestations as OCI referrers of the image (referrers tag "
        "schema where the registry lacks the API).")] = False,
    sign: Annotated[str, typer.Option(
        "--sign", help="none, cosign (cosign attest signs and pushes) or sigstore "
        "(sigstore-python, ambient OIDC identity).")] = "none",
    key: Annotated[str | None, typer.Option("--key", help="With --sign cosign: its --key.")
                   ] = None,
    platform: o.Platform = None, username: o.Username = None,
    password_stdin: o.PasswordStdin = False, insecure_registry: o.Insecure = None,
    quiet: o.Quiet = False, debug: o.Debug = False,
) -> int:
    """Write in-toto attestations (SBOMs, gate decision, probe results) about an image."""
    from ...attest import bundle_lines
    from ...attest.run import AttestRequest, run_attest
    from ..output import write_atomic

    outcome = run_attest(AttestRequest(
        image=image, sboms=tuple(sbom_format or ("cyclonedx", "spdx")), policy=policy,
        probe=probe, probe_timeout=probe_timeout, push=push, sign=sign, key=key,
        platform=platform, registry=o.registry_options(username, password_stdin,
                                                       insecure_registry)))
    text = bundle_lines(outcome.statements)
    if output and output != "-":
        write_atomic(output, text)
    elif output == "-" or not (push or sign != "none"):
        sys.stdout.write(text)
    if not quiet:
        for st in outcome.statements:
            sys.stderr.write(f"attested {st.predicate_type} about {st.subject.name}@"
                             f"{st.subject.digest}\n")
        for p in outcome.pushed:
            sys.stderr.write(f"pushed {p.digest} ({p.predicate_type}, {p.via})\n")
        for cmd in outcome.cosign:
            sys.stderr.write(f"signed: {cmd}\n")
    return EXIT_POLICY if outcome.gate_passed is False else EXIT_OK
