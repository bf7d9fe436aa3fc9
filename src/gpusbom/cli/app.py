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

import copy
import sys
import time as _time
from typing import Any

import typer

from .. import __version__
from ._common import (  # noqa: F401 - re-exported for command modules and tests
    EXIT_INCOMPLETE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_POLICY,
    EXIT_USAGE,
    exits,
    fail,
    stop_on_sigterm,
)

_START = _time.perf_counter()

app = typer.Typer(
    name="gpusbom",
    help="SBOMs and supply-chain facts for GPU software stacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


#: click's shell-completion protocol: ``_GPUSBOM_COMPLETE=complete_bash gpusbom`` (and zsh,
#: fish) prints the completions of ``COMP_WORDS``; ``gpusbom completion SHELL`` the script
COMPLETE_VAR = "_GPUSBOM_COMPLETE"

#: the commands listed first in ``--help`` (the rest follow by module name)
_FIRST = ("scan", "host_snapshot", "probe", "version")


def _register_commands() -> None:
    """Import every module of ``gpusbom.cli.commands``: each registers its own commands."""
    import importlib
    import pkgutil

    from . import commands

    names = [m.name for m in pkgutil.iter_modules(commands.__path__)
             if not m.name.startswith("_")]
    for name in sorted(names, key=lambda n: (_FIRST.index(n) if n in _FIRST else len(_FIRST),
                                             n)):
        importlib.import_module(f"{commands.__name__}.{name}")


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


def _only(name: str) -> typer.Typer | None:
    """``app`` with just the top-level command or group ``name`` (None when there is no such
    command): click parameters are built for the command that runs, not for all of them
    (every command's: 25 ms of each run on a 2-core VM; one command's: 3 ms). A callback
    keeps it a group, so ``gpusbom NAME ...`` parses as with the whole tree."""
    from typer.main import get_command_name

    cmds = [c for c in app.registered_commands
            if (c.name or get_command_name(c.callback.__name__ if c.callback else "")) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not cmds and not groups:
        return None
    one = copy.copy(app)
    one.registered_commands, one.registered_groups = cmds, groups

    @one.callback()
    def _group() -> None:
        pass

    return one


def command(argv: list[str] | None = None) -> Any:
    """The command tree as click runs it, with what every command accepts added in one
    place: ``-h``/``--help``, ``-q``/``--quiet``, and ``gpusbom --version``. With ``argv``
    that starts with a command's name, only that command (the rest cannot run)."""
    from typer.completion import completion_init  # type: ignore[attr-defined]  # public module, re-exported name
    from typer.core import TyperOption

    completion_init()  # typer's bash/zsh/fish classes for COMPLETE_VAR (add_completion=False)
    one = _only(argv[0]) if argv else None
    cmd = typer.main.get_command(one or app)
    cmd.context_settings["help_option_names"] = ["-h", "--help"]  # inherited by subcommands
    cmd.params.append(TyperOption(
        param_decls=["--version"], is_flag=True, expose_value=False, is_eager=True,
        callback=_print_version, help="Print the gpusbom version and exit."))
    _accept_quiet(cmd)
    from .helptext import lazy_help
    from .panels import group_help

    group_help(cmd)
    lazy_help(cmd)
    return cmd


#: allocations between two young-generation passes of the cyclic garbage collector
GC_THRESHOLD = 10_000


def _tune_gc() -> None:
    """A command keeps most of what it loads to its end (modules, the catalog, the advisory
    database: 75,000-90,000 objects in a scan), and the collector's default cadence (a pass
    every 700 allocations, a full pass every 70,000) walked them 200-270 times in a small
    image's scan: 70-130 ms of CPU on a 2-core VM, 20-60 ms at this cadence. Cycles are
    still collected; the young generation holds at most ~10,000 objects (a few MB)."""
    import gc

    if gc.get_threshold()[0] < GC_THRESHOLD:
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


#: options every command takes, anywhere before ``--`` (``gpusbom.settings``)
GLOBAL_OPTIONS = {"--config": None, "--cache-dir": "cache_dir"}


def _global_options(argv: list[str]) -> list[str]:
    """``argv`` without ``--config PATH`` and ``--cache-dir DIR`` (also ``--opt=VALUE``),
    which go to the settings: the config file is read (an error in it: exit 3, naming the
    file and line) before the command runs."""
    from .. import settings
    from ..errors import UsageError

    settings.reset()
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--":
            out.append(arg)
            out.extend(it)
            break
        opt, eq, value = arg.partition("=")
        if opt not in GLOBAL_OPTIONS:
            out.append(arg)
            continue
        if not eq:
            nxt = next(it, None)
            if nxt is None:
                raise UsageError(f"{opt} needs a value")
            value = nxt
        if not value:
            raise UsageError(f"{opt}: empty value")
        name = GLOBAL_OPTIONS[opt]
        if name is None:
            settings.use_config(value)
        else:
            settings.set_flag(name, value, opt)
    settings.effective()  # reads the config file now: a bad one fails before the command
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code instead of raising."""
    from .. import _gc
    from .._alloc import tune_allocator

    _tune_gc()
    _gc.pause()  # while the command loads (gpusbom._gc); resumed at the latest below
    stop_on_sigterm()
    try:
        args = _global_options(sys.argv[1:] if argv is None else argv)
        tune_allocator()  # before any layer thread allocates (see gpusbom._alloc)
        rv = command(args)(args=args, standalone_mode=False)
    except (typer.Exit, SystemExit) as exc:
        return fail(exc)
    except Exception as exc:  # noqa: BLE001 - the CLI's boundary: usage errors, and anything unexpected (exit 70)
        return fail(exc, "--debug" in (argv if argv is not None else sys.argv))
    finally:
        _gc.resume()
    return rv if isinstance(rv, int) else EXIT_OK
