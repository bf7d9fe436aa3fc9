"""``gpusbom`` command line.

Exit codes (documented in the README):
    0  ok
    1  policy / gate failed (gate, --fail-on)
    2  usage error
    3  input or configuration error (missing image, corrupt layer, digest mismatch, ...)
    4  incomplete: --strict and the scan recorded unknowns
    70 internal error (a bug: please report it)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time as _time
from enum import Enum
from typing import Annotated, Any

import typer

from .. import __version__
from ..errors import IncompleteError, UsageError
from ._common import (  # noqa: F401 - re-exported for command modules and tests
    EXIT_INCOMPLETE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_POLICY,
    EXIT_USAGE,
    exits,
)
from ._common import fail as _fail

_START = _time.perf_counter()

app = typer.Typer(
    name="gpusbom",
    help="SBOMs and supply-chain facts for GPU software stacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


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


@app.command()
def scan(
    target: Annotated[
        str | None, typer.Argument(help="Image reference or path (same as --image).")
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            "-i",
            help="name:tag, name@sha256:... (the local Docker Engine if it has the image, else "
            "the registry), registry:REF, docker:REF, docker-archive:PATH, oci-archive:PATH, "
            "oci:DIR[:TAG], dir:PATH, sif:PATH (Apptainer/Singularity), containerd:REF, "
            "containers-storage:REF, or a bare path.",
        ),
    ] = None,
    output: Annotated[
        list[str] | None,
        typer.Option(
            "--output",
            "-o",
            help="FORMAT[=PATH], repeatable. Formats: table, json, cyclonedx-json, "
            "cyclonedx-xml, spdx-json, spdx-tag-value, spdx3-json. Default: table to stdout.",
        ),
    ] = None,
    source: Annotated[
        SourceChoice | None, typer.Option(help="Force a source instead of detecting it.")
    ] = None,
    platform: Annotated[
        str | None, typer.Option(help="os/arch[/variant] to pick from a multi-platform index.")
    ] = None,
    cyclonedx_version: Annotated[
        CdxVersion, typer.Option("--cyclonedx-version", help="CycloneDX spec version.")
    ] = CdxVersion.v16,
    cyclonedx_compat: Annotated[
        bool, typer.Option("--cyclonedx-compat", help="CycloneDX JSON: evidence identity as "
                           "one object, readable by Syft 1.18 and other cyclonedx-go tools.")
    ] = False,
    collector: Annotated[
        list[str] | None, typer.Option("--collector", help="Run only these collectors (ids).")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 4 when anything could not be determined.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
    username: Annotated[
        str | None,
        typer.Option(help="Registry user name (with --password-stdin); else ~/.docker/config.json."),
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the registry password from stdin.")
    ] = False,
    insecure_registry: Annotated[
        list[str] | None,
        typer.Option(
            "--insecure-registry",
            help="HOST or HOST:PORT to reach over plain HTTP or unverified TLS; repeatable.",
        ),
    ] = None,
    max_file_size: Annotated[
        str | None,
        typer.Option(
            "--max-file-size",
            help="Largest file a collector reads, package databases included (bytes, or with "
            "K, M, G; default 2G). Larger files become an unknown that says what to pass.",
        ),
    ] = None,
    keep_env_secrets: Annotated[
        bool,
        typer.Option(
            "--keep-env-secrets",
            help="Keep image environment values whose names look secret (*_TOKEN, "
            "*_PASSWORD, AWS_SECRET_*, ...) in SBOM properties; they are redacted by default.",
        ),
    ] = False,
    verify_diff_ids: Annotated[
        bool,
        typer.Option(
            "--verify-diff-ids",
            help="Also hash the uncompressed layers against the config's diff_ids "
            "(blob digests are always verified; this about doubles CPU time).",
        ),
    ] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Read every layer, ignoring and not updating the layer-result cache "
            "(~/.cache/gpusbom/layers.sqlite; GPUSBOM_NO_CACHE=1 does the same).",
        ),
    ] = False,
    cache_max_size: Annotated[
        str,
        typer.Option(
            "--cache-max-size",
            help="Size the layer-result cache may grow to before the least recently used "
            "layers are evicted (e.g. 500M, 2G).",
        ),
    ] = "2G",
    max_memory: Annotated[
        str,
        typer.Option(
            "--max-memory",
            help="Memory for the whole scan (all worker processes): sizes the layer "
            "workers and parallel inflaters (e.g. 512M, 1G).",
        ),
    ] = "1G",
    host: Annotated[
        bool,
        typer.Option("--host", help="Scan this machine (/): GPUs, drivers, firmware, GPU stack."),
    ] = False,
    root: Annotated[
        str | None,
        typer.Option(
            "--root",
            help="Host scan of a mounted node root or a host snapshot (procfs/sysfs from "
            "ROOT/proc, ROOT/sys).",
        ),
    ] = None,
    paths: Annotated[
        list[str] | None,
        typer.Option("--paths", help="Host scan: another directory to inventory; repeatable."),
    ] = None,
    no_nvml: Annotated[
        bool, typer.Option("--no-nvml", help="Host scan: do not query NVML.")
    ] = False,
    analyze_binaries: Annotated[
        bool,
        typer.Option("--analyze-binaries",
                     help="Host scan: also analyze GPU code in libraries (slow on big nodes)."),
    ] = False,
    probe: Annotated[
        bool,
        typer.Option("--probe", help="Host scan: also run the smoke-test kernel on every GPU "
                     "through every runtime found (see gpusbom probe) and attach the results."),
    ] = False,
    probe_timeout: Annotated[
        float, typer.Option("--probe-timeout", help="With --probe: seconds per device (default 20).")
    ] = 20.0,
    probe_backend: Annotated[
        list[str] | None,
        typer.Option("--probe-backend", help="With --probe: only these backends; repeatable."),
    ] = None,
    probe_python: Annotated[
        str | None,
        typer.Option("--probe-python",
                     help="With --probe: Interpreter for the probe backends that run a Python package "
                     "(Triton, SYCL through dpctl). Default: the one that has the package."),
    ] = None,
    sbom: Annotated[
        str | None,
        typer.Option("--sbom", help="Match an existing SBOM (CycloneDX or SPDX, from any tool, "
                     "or gpusbom JSON) instead of scanning: FILE, or - for stdin."),
    ] = None,
    vex: Annotated[
        list[str] | None,
        typer.Option("--vex", help="CycloneDX VEX or OpenVEX file: not-affected statements "
                     "suppress findings (shown with their justification); repeatable."),
    ] = None,
    max_db_age: Annotated[
        float | None,
        typer.Option("--max-db-age", help="Days: a staler advisory database is an error (exit 3)."),
    ] = None,
    offline: Annotated[
        bool,
        typer.Option("--offline", help="Never update the advisory database before the scan "
                     "(by default one older than GPUSBOM_DB_AUTO_UPDATE_DAYS, 5, is updated "
                     "first, as grype does; GPUSBOM_DB_AUTO_UPDATE=0 turns that off)."),
    ] = False,
    fail_on: Annotated[
        str | None,
        typer.Option("--fail-on", help="Exit 1 when an affected advisory finding has at least "
                     "this severity (low, medium, high, critical): a shortcut for gpusbom gate."),
    ] = None,
    push: Annotated[
        str | None,
        typer.Option("--push", help="Also store the scan in a fleet inventory: DB URL "
                     "(sqlite:///PATH or postgresql://...), see gpusbom inventory."),
    ] = None,
    images: Annotated[
        bool,
        typer.Option("--images", help="Host scan: also scan every image in the node's "
                     "containerd and Podman/CRI-O stores (noting which run), each pushed "
                     "with --push labelled with the node."),
    ] = False,
) -> None:
    """Scan a container image or root filesystem and write SBOMs."""
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    try:
        # a host scan pulls nothing: leave the registry client unimported unless asked for
        registry = None if ((host or root or paths) and username is None and not password_stdin
                            and not insecure_registry) \
            else _registry_options(username, password_stdin, insecure_registry)
    except Exception as exc:  # noqa: BLE001 - usage errors become exit codes
        raise typer.Exit(_fail(exc, debug)) from None
    try:
        memory, cache_size = _size(max_memory, "--max-memory"), _size(cache_max_size, "--cache-max-size")
        file_cap = None if max_file_size is None else _size(max_file_size, "--max-file-size")
    except UsageError as exc:
        raise typer.Exit(_fail(exc, debug)) from None
    scan_kwargs = {
        "source": source.value if source else None,
        "platform": platform,
        "collectors": collector,
        "registry": registry,
        "limits": _limits(verify_diff_ids, memory, file_cap),
        "cache": False if no_cache else None,
        "cache_max_size": cache_size,
        "keep_env_secrets": keep_env_secrets,
    }
    if host or root or paths:
        if target or image:
            raise typer.Exit(_fail(UsageError("--host/--root scan a machine: give no image"), debug))
        scan_kwargs = {
            "host_root": root or "/",
            "paths": tuple(paths or ()),
            "collectors": collector,
            "use_nvml": not no_nvml,
            "analyze_binaries": analyze_binaries,
        }
        target = f"host:{root or '/'}"
        if probe:
            if root not in (None, "/") and not _same_machine(root):
                raise typer.Exit(_fail(UsageError(
                    f"--probe runs kernels on this machine's GPUs, but --root {root} is not this "
                    "machine's root (its proc/sys/kernel/random/boot_id differs or is missing: "
                    "a snapshot or another node)"), debug))
            scan_kwargs["probe"] = {"backends": probe_backend, "timeout": probe_timeout,
                                    "python": probe_python}
    elif probe:
        raise typer.Exit(_fail(UsageError("--probe needs --host"), debug))
    elif images:
        raise typer.Exit(_fail(UsageError("--images needs --host or --root"), debug))
    if sbom is not None:
        if host or root or paths or target or image:
            raise typer.Exit(_fail(UsageError("--sbom matches an existing SBOM: give no image "
                                              "and no --host"), debug))
        scan_kwargs = {"sbom": sbom}
        target = f"sbom:{sbom}"
    post = {"vex": tuple(vex or ()), "max_db_age": max_db_age, "fail_on": fail_on, "push": push,
            "offline": offline,
            "node_images": (root or "/") if images else None}
    code = _scan(target, image, output, cyclonedx_version, strict, quiet, debug, scan_kwargs, post,
                 cyclonedx_compat=cyclonedx_compat)
    raise typer.Exit(code)


def _same_machine(root: str) -> bool:
    """Is ROOT this running machine's root (a node's / mounted in a container, with its /proc
    at ROOT/proc)? The kernel's boot id is the same only on the same running kernel."""
    rel = "proc/sys/kernel/random/boot_id"
    try:
        with open("/" + rel, encoding="ascii") as a, \
                open(os.path.join(root, rel), encoding="ascii") as b:
            mine, theirs = a.read(64).strip(), b.read(64).strip()
    except OSError:
        return False
    return bool(mine) and mine == theirs


def _limits(verify_diff_ids: bool, max_memory: int = 1 << 30,
            max_file_bytes: int | None = None) -> Any:
    from ..fsview.types import Limits  # not imported for commands that read no image

    if max_file_bytes is None:
        return Limits(verify_diff_ids=verify_diff_ids, max_memory=max_memory)
    # the temp-file budget must be able to hold such a file (and a layer's older copy)
    spool = max(Limits.max_spool_bytes, 2 * max_file_bytes)
    return Limits(verify_diff_ids=verify_diff_ids, max_memory=max_memory,
                  max_file_bytes=max_file_bytes, max_spool_bytes=spool)


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _size(text: str, option: str) -> int:
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


def _registry_options(
    username: str | None, password_stdin: bool, insecure: list[str] | None
) -> object:
    if not (username or password_stdin or insecure):
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
    return RegistryOptions(username=username, password=password, insecure=tuple(insecure or ()))


def _scan(
    target: str | None,
    image: str | None,
    output: list[str] | None,
    cyclonedx_version: CdxVersion,
    strict: bool,
    quiet: bool,
    debug: bool,
    scan_kwargs: dict[str, Any],
    post: dict[str, Any] | None = None,
    *,
    cyclonedx_compat: bool = False,
) -> int:
    from ..writers import WriterOptions
    from .output import emit, parse_outputs
    from .progress import RichProgress, wants_progress

    try:
        if target and image and target != image:
            raise UsageError("give the image either as an argument or with --image, not both")
        ref = image or target
        if not ref:
            raise UsageError("nothing to scan: pass --image REF (see gpusbom scan --help)")
        specs = parse_outputs(output)
        options = WriterOptions(
            cyclonedx_version=cyclonedx_version.value,
            cyclonedx_compat=cyclonedx_compat,
            color=sys.stdout.isatty() and "NO_COLOR" not in os.environ,
        )
        post = post or {}
        if post.get("fail_on"):
            from ..policy import parse_severity

            parse_severity(post["fail_on"])  # a bad value is a usage error before any work
        # the advisory database: the user's updated copy or the bundled snapshot; a stale one
        # is an input error under --max-db-age
        from ..advisories.db import load_active

        if not post.get("offline"):
            from ..advisories.update import auto_update

            auto_update(quiet=quiet)
        scan_kwargs = {**scan_kwargs,
                       "advisory_db": load_active(max_age_days=post.get("max_db_age"))}
        progress = RichProgress() if wants_progress(quiet) else None
        with progress or contextlib.nullcontext():
            if "sbom" in scan_kwargs:
                from ..scan import scan_sbom

                kw = dict(scan_kwargs)
                result = scan_sbom(kw.pop("sbom"), **kw)
            elif "host_root" in scan_kwargs:
                from ..host import scan_host

                kw = dict(scan_kwargs)
                probe_opts = kw.pop("probe", None)
                probing = _start_probe(probe_opts) if probe_opts else None
                result = scan_host(kw.pop("host_root"), progress=progress, **kw)
                if probing is not None:
                    from ..probe import attach_probes

                    attach_probes(result, probing())
            else:
                from ..scan import scan as do_scan

                result = do_scan(ref, progress=progress, **scan_kwargs)
        if post.get("vex"):
            from ..advisories.vex import apply_vex

            apply_vex(result, post["vex"])
        emit(result, specs, options)
        if post.get("push"):
            from ..inventory import push_scan

            push_scan(result, post["push"])
        if post.get("node_images"):
            from ..node_images import scan_node_images

            _n, failures = scan_node_images(
                post["node_images"], result.target.name or "unknown", push=post.get("push"),
                quiet=quiet, advisory_db=scan_kwargs.get("advisory_db"),
            )
            for line in failures:
                print(f"gpusbom: {line}", file=sys.stderr)
            if failures:
                return 3
        if post.get("fail_on"):
            from ..policy import fail_on_severity, print_summary

            decision = fail_on_severity(result, post["fail_on"])
            if not decision.passed:
                print_summary(decision, sys.stderr)
                return EXIT_POLICY
        if strict and result.unknowns:
            raise IncompleteError(
                f"{ref}: scan incomplete: {len(result.unknowns)} unknown(s), "
                f"first: {result.unknowns[0].collector}: {result.unknowns[0].reason}"
            )
        return EXIT_OK
    except KeyboardInterrupt:
        print("gpusbom: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        return _fail(exc, debug)


@app.command("host-snapshot")
@exits
def host_snapshot(
    out: Annotated[str, typer.Option("--out", help="Empty or new directory to write.")],
    root: Annotated[str, typer.Option("--root", help="Root to capture (default /).")] = "/",
    paths: Annotated[
        list[str] | None, typer.Option("--paths", help="Another directory to inventory.")
    ] = None,
    max_bytes: Annotated[
        int, typer.Option("--max-bytes", help="Bound on captured file content.")
    ] = 64 << 20,
    no_nvml: Annotated[bool, typer.Option("--no-nvml", help="Do not query NVML.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
) -> None:
    """Capture exactly the files a host scan reads (no secrets); replay with scan --root OUT."""
    from ..host import snapshot_host

    m = snapshot_host(out, root=root, paths=tuple(paths or ()), max_bytes=max_bytes,
                      use_nvml=not no_nvml)
    print(f"{out}: {m['files']} files ({m['bytes']} bytes), {m['placeholders']} placeholders, "
          f"{m['links']} links, {len(m['skipped'])} skipped, nvml={'yes' if m['nvml'] else 'no'}",
          file=sys.stderr)


def _start_probe(opts: dict[str, Any]) -> Any:
    """Start the probe beside the host scan; returns a function that waits for its results."""
    import concurrent.futures

    from ..probe import run_probes

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    fut = pool.submit(run_probes, opts.get("backends"), timeout=opts.get("timeout", 20.0),
                      python=opts.get("python"))
    pool.shutdown(wait=False)
    return fut.result


@app.command()
@exits
def probe(
    output: Annotated[
        list[str] | None,
        typer.Option("--output", "-o", help="FORMAT[=PATH], repeatable (as for scan). Default: table."),
    ] = None,
    backend: Annotated[
        list[str] | None,
        typer.Option("--backend", "-b", help="Only these backends (cuda, hip, level-zero, opencl, "
                     "sycl, triton, vulkan); repeatable. Default: all."),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option("--python", help="Interpreter for the probe backends that run a Python package "
                     "(Triton, SYCL through dpctl). Default: the one that has the package."),
    ] = None,
    probe_timeout: Annotated[
        float, typer.Option("--probe-timeout", help="Seconds each device (and each backend's "
                            "enumeration) may take before it is killed and reported as timeout.")
    ] = 20.0,
    require_pass: Annotated[
        bool, typer.Option("--require-pass", help="Exit 1 when any probe failed, erred or timed out.")
    ] = False,
    cyclonedx_version: Annotated[
        CdxVersion, typer.Option("--cyclonedx-version", help="CycloneDX spec version.")
    ] = CdxVersion.v16,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary line on stderr.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
) -> int:
    """Run a small kernel on every GPU through every runtime found, and record the evidence.

    Each (backend, device) runs in its own child process with a deadline; outcomes are
    pass, fail (wrong result), error (runtime error code), timeout and skipped.
    """
    import time

    from ..clock import scan_timestamp
    from ..probe import probe_failures, probe_scan, run_probes
    from .output import emit, parse_outputs, terminal_options

    logging.getLogger(__name__).debug("probe: +%.3f s command start", time.perf_counter() - _START)
    specs = parse_outputs(output)
    t0 = time.perf_counter()
    try:
        results = run_probes(backend, timeout=probe_timeout, python=python)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    elapsed = time.perf_counter() - t0
    logging.getLogger(__name__).debug("probe: +%.3f s all answered", time.perf_counter() - _START)
    emit(probe_scan(results, timestamp=scan_timestamp()), specs,
         terminal_options(cyclonedx_version=cyclonedx_version.value))
    if not quiet:
        devices = [r for r in results if r.device is not None]
        counts: dict[str, int] = {}
        for r in results:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        print(f"gpusbom probe: {len(devices)} device probe(s) in {elapsed:.2f} s: "
              + ", ".join(f"{n} {o}" for o, n in sorted(counts.items())), file=sys.stderr)
    return EXIT_POLICY if require_pass and probe_failures(results) else EXIT_OK


@app.command()
def version() -> None:
    """Print the gpusbom version."""
    print(f"gpusbom {__version__}")


def _register_commands() -> None:
    """Import every module of ``gpusbom.cli.commands``: each registers its own commands."""
    import importlib
    import pkgutil

    from . import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{commands.__name__}.{info.name}")


_register_commands()


def _print_version(ctx: Any, _param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        print(f"gpusbom {__version__}")
        ctx.exit(0)


def _accept_quiet(cmd: Any) -> None:
    """``-q`` on every command: those that show no progress or summary accept it too."""
    from typer.core import TyperOption  # typer's own click (vendored): its option class

    subs = getattr(cmd, "commands", None)
    if subs is not None:  # a group
        for sub in subs.values():
            _accept_quiet(sub)
    elif not any("-q" in getattr(p, "opts", ()) for p in cmd.params):
        cmd.params.append(TyperOption(
            param_decls=["-q", "--quiet"], is_flag=True, expose_value=False,
            help="Accepted by every command; this one shows no progress to silence."))


def command() -> Any:
    """The command tree as click runs it, with what every command accepts added in one
    place: ``-h``/``--help``, ``-q``/``--quiet``, and ``gpusbom --version``."""
    from typer.core import TyperOption

    cmd = typer.main.get_command(app)
    cmd.context_settings["help_option_names"] = ["-h", "--help"]  # inherited by subcommands
    cmd.params.append(TyperOption(
        param_decls=["--version"], is_flag=True, expose_value=False, is_eager=True,
        callback=_print_version, help="Print the gpusbom version and exit."))
    _accept_quiet(cmd)
    return cmd


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising."""
    from .._alloc import tune_allocator

    tune_allocator()  # before any layer thread allocates (see gpusbom._alloc)
    try:
        rv = command()(args=argv, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:  # pragma: no cover - click internals
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - the CLI's boundary: usage errors, and anything unexpected (exit 70)
        show = getattr(exc, "show", None)
        code = getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show(file=sys.stderr)  # click/typer usage errors: exit 2
            return EXIT_USAGE if code == 2 else code
        if type(exc).__name__ == "Abort":
            return 130
        return _fail(exc, "--debug" in (argv if argv is not None else sys.argv))
    return rv if isinstance(rv, int) else EXIT_OK
