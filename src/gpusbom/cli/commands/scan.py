"""``gpusbom scan``: a container image, a root filesystem, a host or an existing SBOM, through
the one pipeline (``gpusbom.pipeline``; ``gpusbom.scan.run``), written by the writers.

Exit codes: 0 ok; 1 ``--fail-on`` found an affected advisory at that severity; 2 usage;
3 input (missing image, corrupt layer, stale database under ``--max-db-age``, a node image
that failed); 4 ``--strict`` and the scan recorded unknowns.
"""

from __future__ import annotations

import sys

from .. import scan_options as o
from .._common import EXIT_OK, exit_code, exits, loads_first
from ..app import app


@app.command()
@exits
@loads_first
def scan(
    target: o.Target = None, image: o.Image = None, output: o.Output = None,
    source: o.Source = None, platform: o.Platform = None,
    cyclonedx_version: o.CdxVer = o.CdxVersion.v16, cyclonedx_compat: o.CdxCompat = False,
    collector: o.Collector = None, strict: o.Strict = False, quiet: o.Quiet = False,
    debug: o.Debug = False, username: o.Username = None,
    password_stdin: o.PasswordStdin = False, insecure_registry: o.Insecure = None,
    max_file_size: o.MaxFileSize = None, keep_env_secrets: o.KeepEnvSecrets = False,
    verify_diff_ids: o.VerifyDiffIds = False, no_cache: o.NoCache = False,
    cache_max_size: o.CacheMaxSize = None, max_memory: o.MaxMemory = None,
    host: o.Host = False, root: o.Root = None, paths: o.Paths = None, no_nvml: o.NoNvml = False,
    analyze_binaries: o.AnalyzeBinaries = False, probe: o.Probe = False,
    probe_timeout: o.ProbeTimeout = 20.0, probe_backend: o.ProbeBackend = None,
    probe_python: o.ProbePython = None, sbom: o.Sbom = None, vex: o.Vex = None,
    max_db_age: o.MaxDbAge = None, offline: o.Offline = False, fail_on: o.FailOn = None,
    push: o.Push = None, images: o.Images = False, exclude: o.Exclude = None,
    no_attachments: o.NoAttachments = False,
    scope: o.ScopeOpt = o.Scope.squashed,
) -> int:
    """Scan a container image or root filesystem and write SBOMs."""
    from functools import partial

    from ... import settings
    from ...errors import UsageError
    from ...pipeline import HostOptions, ProbeOptions, ScanRequest
    from ...scan import Followups, run
    from ..output import emit, parse_outputs, prefork, terminal_options
    from ..progress import RichProgress, wants_progress

    if debug:
        from ... import stagetime

        stagetime.enable()
    # flags first, then GPUSBOM_* variables, then the config file, then the defaults
    output = output or list(settings.get("output")) or None
    offline = offline or bool(settings.get("offline"))
    if no_cache:
        settings.set_flag("no_cache", True, "--no-cache")
    cache_max_size = cache_max_size or str(settings.get("cache_max_size"))
    memory_asked = max_memory is not None or settings.source("max_memory") != "default"
    max_memory = max_memory or str(settings.get("max_memory"))
    insecure_registry = insecure_registry or list(settings.get("insecure_registry")) or None
    max_file_size = max_file_size or settings.get("max_file_size")
    on_host = bool(host or root or paths)
    # a host scan pulls nothing: leave the registry client unimported unless asked for
    registry = o.registry_options(username, password_stdin, insecure_registry,
                                  attachments=not no_attachments)
    memory = o.size(max_memory, "--max-memory")
    if not memory_asked:
        from ...sources.schedule import default_max_memory

        memory = default_max_memory()  # not asked for: scaled with the cores
    cache_size = o.size(cache_max_size, "--cache-max-size")
    file_cap = None if max_file_size is None else o.size(max_file_size, "--max-file-size")
    if target and image and target != image:
        raise UsageError("give the image either as an argument or with --image, not both")
    specs = parse_outputs(output)
    req = ScanRequest(
        reference=image or target, sbom=sbom, source=source.value if source else None,
        platform=platform, registry=registry, collectors=collector,
        limits=o.limits(verify_diff_ids, memory, file_cap),
        cache=False if no_cache else None, cache_max_size=cache_size,
        keep_env_secrets=keep_env_secrets, vex=tuple(vex or ()),
        exclude=tuple(exclude or ()), scope=scope.value,
        host=HostOptions(root=root or "/", paths=tuple(paths or ()), use_nvml=not no_nvml,
                         analyze_binaries=analyze_binaries) if on_host else None,
        probe=ProbeOptions(backends=tuple(probe_backend) if probe_backend else None,
                           timeout=probe_timeout, python=probe_python) if probe else None)
    then = Followups(offline=offline, max_db_age=max_db_age, push=push, node_images=images,
                     fail_on=fail_on, strict=strict, quiet=quiet)
    options = terminal_options(cyclonedx_version=cyclonedx_version.value,
                               cyclonedx_compat=cyclonedx_compat)
    # a host scan's outputs besides the native JSON: rendered by children forked now, which
    # import their writers while the host is walked (cli.output.Preforked)
    early = prefork(specs, options) if on_host else None
    try:
        outcome = run(req, then, partial(emit, specs=specs, options=options, early=early),
                      RichProgress() if wants_progress(quiet) else None)
    finally:
        if early is not None:
            early.close()
    for message in outcome.messages:
        sys.stderr.write(message)
    # the messages said why; the error only chooses the exit code
    return EXIT_OK if outcome.failed is None else exit_code(outcome.failed)
