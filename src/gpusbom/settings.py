"""Every knob of gpusbom in one place: the only module that reads ``GPUSBOM_*`` variables.

Each setting (:data:`SETTINGS`) has a name (its key in a config file), a type, a default and
its environment variable (``GPUSBOM_`` and the name in upper case). A value comes from, in
order (as Syft and Trivy do):

1. a command-line flag (the CLI calls :func:`set_flag`);
2. the environment variable;
3. the config file: ``--config PATH``, else ``.gpusbom.yaml`` in the working directory, else
   ``$XDG_CONFIG_HOME/gpusbom/config.yaml`` (``~/.config/gpusbom/config.yaml``);
4. the default.

Values are read when asked for, never frozen at import (tests and the CLI set variables
after gpusbom is imported). A config file is a YAML mapping of setting names; an unknown
key or a value of the wrong type is a :class:`~gpusbom.errors.ConfigError` naming the key,
the file and the line. ``gpusbom config`` prints the effective settings and where each came
from; ``docs/configuration.md`` is generated from :data:`SETTINGS` (:func:`markdown`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["SETTINGS", "Setting", "config_path", "effective", "env_name", "get", "markdown",
           "raw", "reset", "set_flag", "source", "use_config"]

PREFIX = "GPUSBOM_"
#: the largest config file read
MAX_CONFIG_BYTES = 1 << 20
_FALSE = ("", "0", "false", "no", "off")
_TYPES = ("bool", "int", "float", "str", "path", "list")


@dataclass(frozen=True)
class Setting:
    """One knob. ``type``: bool, int, float, str, path, or list (of strings; in the
    environment separated by ``sep``)."""

    name: str
    type: str
    default: Any
    help: str
    section: str
    sep: str = ","

    @property
    def env(self) -> str:
        return PREFIX + self.name.upper()


def _s(section: str, name: str, type_: str, default: Any, help_: str, sep: str = ",") -> Setting:
    return Setting(name, type_, default, help_, section, sep)


_ALL = (
    # cache
    _s("cache", "cache_dir", "path", None,
       "gpusbom's directory in the user cache (layer results, the updated advisory database, "
       "parsed tables, the host snapshot). Default: $XDG_CACHE_HOME/gpusbom, else "
       "~/.cache/gpusbom. Created 0700; one owned by another user or writable by group or "
       "others is refused unless given with --cache-dir."),
    _s("cache", "no_cache", "bool", False,
       "Read every layer (and scan the host afresh) instead of using the layer-result cache "
       "(scan --no-cache)."),
    _s("cache", "cache_max_size", "str", "2G",
       "Size above which the layer-result cache evicts its least recently used entries "
       "(scan --cache-max-size)."),
    # output
    _s("output", "output", "list", [],
       "Outputs of `gpusbom scan` when no -o is given, each FORMAT or FORMAT=FILE "
       "(as -o). Default: the table on the terminal."),
    _s("output", "dashboard_write_token_file", "str", None,
       "A file holding the dashboard's write token (inventory serve --write-token-file): "
       "enables triage. Default: the dashboard is read-only."),
    _s("advisories", "ngc_registry", "str", None,
       "NVIDIA NGC registry hosts, comma-separated, whose credentials are the NGC API key "
       "($NGC_API_KEY, else $NGC_CLI_API_KEY) with the user $oauthtoken. Default: nvcr.io."),
    _s("output", "inventory_db", "str", None,
       "The inventory database URL (inventory --db). Default: an SQLite file "
       "$XDG_DATA_HOME/gpusbom/inventory.db."),
    # advisories and updates
    _s("advisories", "offline", "bool", False,
       "Use only the bundled advisory snapshot: no automatic update (scan --offline)."),
    _s("advisories", "db_auto_update", "bool", True,
       "Update an advisory database older than db_auto_update_days before a scan."),
    _s("advisories", "db_auto_update_days", "float", 5.0,
       "Age in days above which the advisory database is updated before a scan (grype's)."),
    _s("advisories", "db_auto_update_retry_hours", "float", 2.0,
       "Hours before a failed automatic update is tried again."),
    _s("advisories", "nvidia_csaf_url", "str", None,
       "NVIDIA's CSAF feed (advisories update): a URL, or off."),
    _s("advisories", "osv_url", "str", None, "The OSV feed: a URL, or off."),
    _s("advisories", "curated_url", "str", None, "The curated feed: a URL, or off."),
    _s("advisories", "kev_url", "str", None, "CISA's KEV catalog: a URL, or off."),
    _s("advisories", "cve5_url", "str", None, "The CVE 5 records feed: a URL, or off."),
    _s("catalog", "catalog", "list", [],
       "Extra catalog YAML files whose rows are added to the shipped ones.", os.pathsep),
    # limits and workers
    _s("limits", "max_memory", "str", "1G",
       "Memory the whole scan's process tree stays within (scan --max-memory). Left at "
       "its default, 128M per core on more than 8 cores (16 cores: 2G), at most 4G."),
    _s("workers", "cpus", "int", None,
       "Plan layer work as if the machine had this many CPUs. Default: the CPUs this "
       "process may use."),
    _s("workers", "layer_workers", "int", None, "Layers read at once. Default: planned."),
    _s("workers", "layer_processes", "int", None,
       "Forked layer worker processes (0: none). Default: planned."),
    _s("workers", "inflate_threads", "int", None,
       "Threads that inflate one large gzip/zstd layer. Default: planned."),
    _s("workers", "rapidgzip_chunk_kib", "int", None,
       "rapidgzip's chunk size in KiB for parallel inflate. Default: planned."),
    _s("workers", "host_walkers", "int", None,
       "Worker processes of a host walk. Default: one per CPU, at most a few."),
    _s("workers", "analysis_thread", "bool", True,
       "Run the stream analyzers of matched files beside the layer reader."),
    _s("workers", "layer_nice", "int", 0,
       "Lower the priority of the workers of all but the largest layer by this much "
       "(1-19) when the largest is inflated in parallel. 0: priorities left alone. "
       "Measured on 16 cores: no gain (docs/performance.md)."),
    _s("workers", "analysis_threads", "int", None,
       "Threads that analyse the large files of one large layer beside its reader "
       "(at most 16). Default: 1. Measured on 16 cores: 2 threads no faster "
       "(docs/performance.md)."),
    _s("workers", "shards", "int", None,
       "Shards of a crawl (with $JOB_COMPLETION_INDEX as this shard's index)."),
    # scanning
    _s("scan", "no_binary_hash", "bool", False, "Do not compute the SHA-256 of GPU binaries."),
    _s("scan", "no_declared_digests", "bool", False,
       "Do not record the file digests packages declare (dpkg md5sums, wheel RECORD)."),
    _s("scan", "docker_direct", "bool", True,
       "Read a Docker Engine's image layers from its storage when it is local "
       "(else through the save stream)."),
    _s("scan", "malloc_tune", "bool", True,
       "Tune glibc's allocator for the layer threads (unless a MALLOC_* variable is set)."),
    _s("scan", "node_run", "path", None,
       "The node's /run where only the runtime sockets are mounted (node image scans). "
       "Default: ROOT/run."),
    _s("registry", "insecure_registry", "list", [],
       "Registries (HOST or HOST:PORT) reached over plain HTTP or unverified TLS "
       "(scan --insecure-registry)."),
    _s("limits", "max_file_size", "str", None,
       "Largest file a collector keeps (scan --max-file-size). Default: 2G."),
    _s("inventory", "inventory_blobs", "str", None,
       "Where the inventory keeps scan bodies (content-addressed blobs): a directory, "
       "s3://BUCKET/PREFIX (boto3; endpoint from $AWS_ENDPOINT_URL), or db (a table of the "
       "inventory database). Default: a directory beside an SQLite file; db on PostgreSQL."),
    _s("inventory", "inventory_keep_days", "int", None,
       "Retention run by inventory serve (hourly) and inventory prune: scans older than "
       "this many days are removed (the latest of each host and image always stays). "
       "Default: keep everything."),
    _s("inventory", "inventory_keep_last", "int", None,
       "Retention: scans beyond the newest N of each host and image are removed (with "
       "inventory_keep_days: a scan goes when both say so). Default: keep everything."),
    _s("inventory", "push_retry_seconds", "float", None,
       "How long scan --push retries an unreachable inventory database. Default: 30."),
    # probes and registries
    _s("probe", "opencl_platform", "str", None, "The OpenCL platform a probe uses (by name)."),
    _s("probe", "opencl_pci", "str", None, "The PCI address of the OpenCL device a probe uses."),
    _s("probe", "probe_test_kernels", "str", None,
       "A module of test kernels for the probe (gpusbom's own tests)."),
    # debugging
    _s("debug", "debug_inflate", "bool", False,
       "Print the layer readers' and inflaters' timings on stderr."),
    _s("debug", "debug_profile", "path", None,
       "A directory where each layer worker writes its cProfile."),
)

#: name -> setting, in documentation order
SETTINGS: dict[str, Setting] = {s.name: s for s in _ALL}

_flags: dict[str, tuple[Any, str]] = {}
_config_arg: list[Path] = []  # --config PATH, when given
# (path, mtime_ns, size) -> {name: (value, "FILE:LINE")}
_loaded: dict[tuple[str, int, int], dict[str, tuple[Any, str]]] = {}


def env_name(name: str) -> str:
    """The environment variable of setting ``name``."""
    return SETTINGS[name].env


def set_flag(name: str, value: Any, flag: str) -> None:
    """A command-line flag's value (``flag``: how it was given, for ``gpusbom config``)."""
    SETTINGS[name]  # noqa: B018 - a KeyError for a name that is not a setting
    _flags[name] = (value, f"flag {flag}")


def use_config(path: str | Path) -> None:
    """``--config PATH``: this file instead of the usual ones (it must exist)."""
    _config_arg[:] = [Path(path)]


def reset() -> None:
    """Forget flags and ``--config`` (tests; each CLI run starts from here)."""
    _flags.clear()
    _config_arg.clear()
    _loaded.clear()


def config_path() -> Path | None:
    """The config file that applies, if any."""
    if _config_arg:
        return _config_arg[0]
    here = Path(".gpusbom.yaml")
    if here.is_file():
        return here
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    p = Path(xdg) / "gpusbom" / "config.yaml"
    return p if p.is_file() else None


def _convert(s: Setting, value: Any, where: str) -> Any:
    """A config file's value as the setting's type; ``ConfigError`` naming ``where``."""
    ok: bool
    if s.type == "bool":
        ok = isinstance(value, bool)
    elif s.type == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif s.type == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif s.type in ("str", "path"):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and s.type == "str":
            value = str(value)
        ok = isinstance(value, str)
    else:
        if isinstance(value, str):
            value = [value]
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    if value is None:
        return None
    if not ok:
        raise ConfigError(f"{where}: {s.name} must be {_article(s.type)}, not {value!r}")
    return value


def _article(t: str) -> str:
    return {"bool": "true or false", "int": "an integer", "float": "a number",
            "str": "a string", "path": "a path", "list": "a list of strings"}[t]


def _load(path: Path) -> dict[str, tuple[Any, str]]:
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from None
    got = _loaded.get(key)
    if got is not None:
        return got
    if st.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    import yaml

    safe = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        node = yaml.compose(text, Loader=safe)  # noqa: S506 - a safe loader
        data = yaml.load(text, Loader=safe)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}{line}: not YAML: "
                          f"{getattr(exc, 'problem', None) or exc}") from None
    out: dict[str, tuple[Any, str]] = {}
    if data is None:
        _loaded[key] = out
        return out
    if not isinstance(data, dict) or node is None or not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"config file {path}:1: must be a mapping of setting names")
    lines = {k.value: k.start_mark.line + 1 for k, _v in node.value
             if isinstance(k, yaml.ScalarNode)}
    for k, v in data.items():
        where = f"{path}:{lines.get(str(k), 1)}"
        name = str(k).replace("-", "_")
        if name not in SETTINGS:
            raise ConfigError(f"{where}: unknown setting {k!r} (gpusbom config lists them)")
        out[name] = (_convert(SETTINGS[name], v, where), f"config {where}")
    _loaded[key] = out
    return out


def _from_config(name: str) -> tuple[Any, str] | None:
    path = config_path()
    if path is None:
        return None
    return _load(path).get(name)


def _parse_env(s: Setting, text: str) -> Any:
    if s.type == "bool":
        return text.strip().lower() not in _FALSE
    if s.type in ("int", "float"):
        try:
            return int(text) if s.type == "int" else float(text)
        except ValueError:
            raise ConfigError(f"{s.env}={text!r}: not {_article(s.type)}") from None
    if s.type == "list":
        return [p for p in text.split(s.sep) if p.strip()]
    return text


def _lookup(name: str) -> tuple[Any, str]:
    s = SETTINGS[name]
    if name in _flags:
        return _flags[name]
    text = os.environ.get(s.env)
    # an empty variable is unset (as before: ``os.environ.get(...) or ...``), but a list
    if text is not None and (text != "" or s.type == "list"):
        return _parse_env(s, text), f"env {s.env}"
    got = _from_config(name)
    if got is not None:
        return got
    return s.default, "default"


def get(name: str) -> Any:
    """The effective value of setting ``name`` (see the module docstring)."""
    return _lookup(name)[0]


def source(name: str) -> str:
    """Where ``get(name)`` came from: ``flag ...``, ``env ...``, ``config FILE:LINE`` or
    ``default``."""
    return _lookup(name)[1]


def raw(name: str, default: str = "") -> str:
    """The setting as the text of its environment variable (the form that older call sites
    parse): the variable when set, else a config value written that way, else ``default``."""
    s = SETTINGS[name]
    if name in _flags:
        return _text(s, _flags[name][0]) or default
    text = os.environ.get(s.env)
    if text is not None:
        return text
    got = _from_config(name)
    if got is not None and got[0] is not None:
        return _text(s, got[0]) or default
    return default


def _text(s: Setting, value: Any) -> str | None:
    if value is None:
        return None
    if s.type == "bool":
        return "1" if value else "0"
    if s.type == "list":
        return s.sep.join(value)
    return str(value)


def effective() -> list[tuple[str, Any, str]]:
    """(name, value, where from) of every setting."""
    return [(name, *_lookup(name)) for name in SETTINGS]


def markdown() -> str:
    """``docs/configuration.md``: every setting, generated from :data:`SETTINGS`."""
    out = [
        "# Configuration",
        "",
        "<!-- generated from src/gpusbom/settings.py by scripts/gen-config-docs; "
        "do not edit -->",
        "",
        "Every setting comes from, in order: a command-line flag; its `GPUSBOM_*` environment",
        "variable; the config file; the default. The config file is `--config PATH`, else",
        "`.gpusbom.yaml` in the working directory, else `$XDG_CONFIG_HOME/gpusbom/config.yaml`",
        "(`~/.config/gpusbom/config.yaml`): a YAML mapping of the names below. An unknown name",
        "or a value of the wrong type is an error (exit 3) naming the key, the file and the line.",
        "`gpusbom config` prints the effective settings and where each came from.",
        "",
        "```yaml",
        "# .gpusbom.yaml",
        "output: [json=out.json, table]",
        "offline: true",
        "max_memory: 4G",
        "```",
        "",
        "Booleans in the environment: `0`, `false`, `no`, `off` and empty are false, anything",
        "else true. Lists: comma-separated (`catalog`: the path separator, `:`).",
    ]
    section = None
    for s in SETTINGS.values():
        if s.section != section:
            section = s.section
            out += ["", f"## {section}", "", "| Setting | Environment | Type | Default | |",
                    "|---|---|---|---|---|"]
        shown = str(s.default).lower() if s.type == "bool" else _text(s, s.default)
        default = "" if s.default in (None, []) else f"`{shown}`"
        out.append(f"| `{s.name}` | `{s.env}` | {s.type} | {default} | {s.help} |")
    return "\n".join(out) + "\n"
