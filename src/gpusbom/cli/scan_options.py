"""The options of ``gpusbom scan`` (typer annotations), and turning their text into the
library's values: sizes, limits, registry credentials. Parsing only; no scanning here."""

from __future__ import annotations

import sys
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import UsageError

if TYPE_CHECKING:
    from ..fsview.types import Limits
    from ..sources.registry import RegistryOptions


class SourceChoice(str, Enum):
    docker = "docker"
    docker_archive = "docker-archive"
    oci_archive = "oci-archive"
    oci = "oci"
    dir = "dir"
    registry = "registry"
    sif = "sif"
    containerd = "containerd"
    containers_storage = "containers-storage"


class CdxVersion(str, Enum):
    v16 = "1.6"
    v15 = "1.5"
    v17 = "1.7"


#: the help panels of ``scan --help`` (and the commands that share these options), by
#: option; an option not named here is under "Advanced"
PANELS: dict[str, tuple[str, ...]] = {
    "Image": ("--image", "--source", "--platform", "--username", "--password-stdin",
              "--insecure-registry", "--scope", "--verify-diff-ids", "--keep-env-secrets"),
    "Host": ("--host", "--root", "--paths", "--no-nvml", "--analyze-binaries", "--images",
             "--probe", "--probe-timeout", "--probe-backend", "--probe-python"),
    "Outputs": ("--output", "--cyclonedx-version", "--cyclonedx-compat", "--strict", "--push"),
    "Advisories": ("--sbom", "--vex", "--max-db-age", "--offline", "--fail-on"),
}
_PANEL_OF = {opt: panel for panel, opts in PANELS.items() for opt in opts}


def _opt(*decls: str, help: str) -> Any:  # noqa: A002 - typer's name
    return typer.Option(*decls, help=help, rich_help_panel=_PANEL_OF.get(decls[0], "Advanced"))


class Scope(str, Enum):
    squashed = "squashed"
    all_layers = "all-layers"


Target = Annotated[str | None, typer.Argument(help="Image reference or path (same as --image).")]
Image = Annotated[str | None, _opt(
    "--image", "-i", help="name:tag, name@sha256:... (the local Docker Engine if it has the "
    "image, else the registry), registry:REF, docker:REF, docker-archive:PATH, "
    "oci-archive:PATH, oci:DIR[:TAG], dir:PATH, sif:PATH (Apptainer/Singularity), "
    "containerd:REF, containers-storage:REF, or a bare path.")]
Output = Annotated[list[str] | None, _opt(
    "--output", "-o", help="FORMAT[=PATH], repeatable. Formats: {formats:scan}. Default: "
    "table to stdout.")]
Source = Annotated[SourceChoice | None, _opt("--source", help="Force a source instead of "
                                            "detecting it.")]
Platform = Annotated[str | None, _opt("--platform", help="os/arch[/variant] to pick from a "
                                      "multi-platform index.")]
CdxVer = Annotated[CdxVersion, _opt("--cyclonedx-version", help="CycloneDX spec version.")]
CdxCompat = Annotated[bool, _opt(
    "--cyclonedx-compat", help="CycloneDX JSON: evidence identity as one object, readable by "
    "Syft 1.18 and other cyclonedx-go tools.")]
Collector = Annotated[list[str] | None, _opt("--collector", help="Run only these collectors "
                                             "(ids).")]
Exclude = Annotated[list[str] | None, _opt(
    "--exclude", help="GLOB of paths to leave out of collection, in images and hosts "
    "(/usr/share/doc/**, ./opt/old: a directory and everything below it); repeatable.")]
ScopeOpt = Annotated[Scope, _opt(
    "--scope", help="squashed: the filesystem as the image runs; all-layers: also what "
    "later layers deleted or replaced, each with the layer that had it.")]
Strict = Annotated[bool, _opt("--strict", help="Exit 4 when anything could not be determined.")]
Quiet = Annotated[bool, _opt("--quiet", "-q", help="No progress display.")]
Debug = Annotated[bool, _opt("--debug", help="Show tracebacks and debug logs.")]
Username = Annotated[str | None, _opt("--username", help="Registry user name (with "
                                      "--password-stdin); else ~/.docker/config.json.")]
PasswordStdin = Annotated[bool, _opt("--password-stdin", help="Read the registry password "
                                     "from stdin.")]
Insecure = Annotated[list[str] | None, _opt(
    "--insecure-registry", help="HOST or HOST:PORT to reach over plain HTTP or unverified "
    "TLS; repeatable.")]
MaxFileSize = Annotated[str | None, _opt(
    "--max-file-size", help="Largest file a collector reads, package databases included "
    "(bytes, or with K, M, G; default 2G). Larger files become an unknown that says what to "
    "pass.")]
KeepEnvSecrets = Annotated[bool, _opt(
    "--keep-env-secrets", help="Keep image environment values whose names look secret "
    "(*_TOKEN, *_PASSWORD, AWS_SECRET_*, ...) in SBOM properties; they are redacted by "
    "default.")]
VerifyDiffIds = Annotated[bool, _opt(
    "--verify-diff-ids", help="Also hash the uncompressed layers against the config's "
    "diff_ids (blob digests are always verified; this about doubles CPU time).")]
NoCache = Annotated[bool, _opt(
    "--no-cache", help="Read every layer, ignoring and not updating the layer-result cache "
    "(~/.cache/gpusbom/layers.sqlite; GPUSBOM_NO_CACHE=1 does the same).")]
CacheMaxSize = Annotated[str | None, _opt(
    "--cache-max-size", help="Size the layer-result cache may grow to before the least "
    "recently used layers are evicted (e.g. 500M, 2G). Default: the cache_max_size setting, "
    "2G.")]
MaxMemory = Annotated[str | None, _opt(
    "--max-memory", help="Memory for the whole scan (all worker processes): sizes the layer "
    "workers and parallel inflaters (e.g. 512M, 1G). Default: the max_memory setting, 1G "
    "(left unset: 128M per core on more than 8 cores, at most 4G).")]
Host = Annotated[bool, _opt("--host", help="Scan this machine (/): GPUs, drivers, firmware, "
                            "GPU stack.")]
Root = Annotated[str | None, _opt(
    "--root", help="Host scan of a mounted node root or a host snapshot (procfs/sysfs from "
    "ROOT/proc, ROOT/sys).")]
Paths = Annotated[list[str] | None, _opt("--paths", help="Host scan: another directory to "
                                         "inventory; repeatable.")]
NoNvml = Annotated[bool, _opt("--no-nvml", help="Host scan: do not query NVML.")]
AnalyzeBinaries = Annotated[bool, _opt(
    "--analyze-binaries", help="Host scan: also analyze GPU code in libraries (slow on big "
    "nodes).")]
Probe = Annotated[bool, _opt(
    "--probe", help="Host scan: also run the smoke-test kernel on every GPU through every "
    "runtime found (see gpusbom probe) and attach the results.")]
ProbeTimeout = Annotated[float, _opt("--probe-timeout", help="With --probe: seconds per "
                                     "device (default 20).")]
ProbeBackend = Annotated[list[str] | None, _opt("--probe-backend", help="With --probe: only "
                                                "these backends; repeatable.")]
ProbePython = Annotated[str | None, _opt(
    "--probe-python", help="With --probe: Interpreter for the probe backends that run a "
    "Python package (Triton, SYCL through dpctl). Default: the one that has the package.")]
Sbom = Annotated[str | None, _opt(
    "--sbom", help="Match an existing SBOM (CycloneDX or SPDX, from any tool, or gpusbom "
    "JSON) instead of scanning: FILE, or - for stdin.")]
Vex = Annotated[list[str] | None, _opt(
    "--vex", help="CycloneDX VEX or OpenVEX file: not-affected statements suppress findings "
    "(shown with their justification); repeatable.")]
NoAttachments = Annotated[bool, _opt(
    "--no-attachments", help="registry: do not read the image's OCI referrers (attached "
    "SBOMs, vendor VEX, attestations; see docs/registry-attachments.md).")]
MaxDbAge = Annotated[float | None, _opt("--max-db-age", help="Days: a staler advisory "
                                        "database is an error (exit 3).")]
Offline = Annotated[bool, _opt(
    "--offline", help="Never update the advisory database before the scan (by default one "
    "older than GPUSBOM_DB_AUTO_UPDATE_DAYS, 5, is updated first, as grype does; "
    "GPUSBOM_DB_AUTO_UPDATE=0 turns that off).")]
FailOn = Annotated[str | None, _opt(
    "--fail-on", help="Exit 1 when an affected advisory finding has at least this severity "
    "(low, medium, high, critical): a shortcut for gpusbom gate.")]
Push = Annotated[str | None, _opt(
    "--push", help="Also store the scan in a fleet inventory: DB URL (sqlite:///PATH or "
    "postgresql://...), see gpusbom inventory.")]
Images = Annotated[bool, _opt(
    "--images", help="Host scan: also scan every image in the node's containerd and "
    "Podman/CRI-O stores (noting which run), each pushed with --push labelled with the node.")]


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text: str, option: str) -> int:
    """``512M``, ``2G``, ``1048576`` (binary units; a trailing B or iB is allowed)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    number = t[: len(t) - len(unit)]
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a size such as 512M or 2G") from None
    if value <= 0:
        raise UsageError(f"{option} {text!r}: must be positive")
    return int(value)


def limits(verify_diff_ids: bool, max_memory: int = 1 << 30,
           max_file_bytes: int | None = None) -> Limits:
    from ..fsview.types import Limits  # not imported for commands that read no image

    if max_file_bytes is None:
        return Limits(verify_diff_ids=verify_diff_ids, max_memory=max_memory)
    # the temp-file budget must be able to hold such a file (and a layer's older copy)
    spool = max(Limits.max_spool_bytes, 2 * max_file_bytes)
    return Limits(verify_diff_ids=verify_diff_ids, max_memory=max_memory,
                  max_file_bytes=max_file_bytes, max_spool_bytes=spool)


def registry_options(username: str | None, password_stdin: bool,
                     insecure: list[str] | None, attachments: bool = True
                     ) -> RegistryOptions | None:
    if not (username or password_stdin or insecure or not attachments):
        return None  # the registry source's defaults; don't import it for local scans
    from ..sources.registry import RegistryOptions, Secret

    if password_stdin and username is None:
        raise UsageError("--password-stdin needs --username")
    if username is not None and not password_stdin:
        raise UsageError("--username needs --password-stdin (the password is read from stdin)")
    password = None
    if password_stdin:
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("--password-stdin: pipe the password into gpusbom's stdin")
        password = Secret(sys.stdin.read().rstrip("\r\n"))
        if not password:
            raise UsageError("--password-stdin: stdin was empty")
    return RegistryOptions(username=username, password=password, insecure=tuple(insecure or ()),
                           attachments=attachments)
