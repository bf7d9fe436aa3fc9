"""``docs/man/gpusbom.1``: the man page, generated from the command tree (every command,
its arguments and options, as ``--help`` shows them). ``scripts/gen-man`` writes it; a test
checks that the committed page is what the CLI generates."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ._common import EXIT_MEANINGS

_HELP = ["-h", "--help"]


def _esc(text: str) -> str:
    """roff-safe text: backslashes, and a leading . or ' that would be a request."""
    out = " ".join(text.split()).replace("\\", "\\e").replace("-", "\\-")
    out = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in out)
    return "\\&" + out if out[:1] in (".", "'") else out


def _walk(cmd: Any, path: list[str]) -> list[tuple[list[str], Any]]:
    subs = getattr(cmd, "commands", None)
    if subs is None:
        return [(path, cmd)]
    out: list[tuple[list[str], Any]] = [(path, cmd)] if path else []
    for name in sorted(subs):
        if not subs[name].hidden:
            out.extend(_walk(subs[name], [*path, name]))
    return out


def _param_lines(ctx: Any, cmd: Any) -> list[str]:
    lines: list[str] = []
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False):
            continue
        if p.param_type_name == "argument":
            head, doc = p.make_metavar(ctx), getattr(p, "help", None) or ""
        else:
            opts = [*p.opts, *p.secondary_opts]
            if set(opts) <= set(_HELP):
                # click 8.2 builds the help option from a set of names: its order follows
                # the process's string hash seed, so the page would change from run to run
                opts = [o for o in _HELP if o in opts]
            names = ", ".join(opts)
            meta = "" if p.is_flag else " " + p.make_metavar(ctx)
            head, doc = names + meta, p.help or ""
        lines += [".TP", f"\\fB{_esc(head)}\\fR", _esc(doc)]
    return lines


def render(root: Any) -> str:
    """The man page (roff) of the click command ``root``."""
    import click

    lines = [f'.TH GPUSBOM 1 "" "gpusbom {__version__}" "User Commands"', ".SH NAME",
             "gpusbom \\- " + _esc(root.help or ""), ".SH SYNOPSIS",
             "\\fBgpusbom\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]..."]
    rctx = click.Context(root, info_name="gpusbom", help_option_names=_HELP)
    lines += [".SH OPTIONS", *_param_lines(rctx, root), ".SH COMMANDS"]
    for path, cmd in _walk(root, []):
        ctx = click.Context(cmd, info_name=" ".join(["gpusbom", *path]),
                            help_option_names=_HELP)
        lines += [".SS " + _esc(" ".join(["gpusbom", *path])), _esc(cmd.help or "")]
        if getattr(cmd, "commands", None) is None:
            lines += _param_lines(ctx, cmd)
    lines += [".SH EXIT STATUS"]
    for code, what in EXIT_MEANINGS:
        lines += [".TP", str(code), _esc(what)]
    lines += [".SH SEE ALSO", "docs/cli.md in the gpusbom repository; \\fBgpusbom COMMAND "
              "\\-\\-help\\fR."]
    return "\n".join(lines) + "\n"


def generate() -> str:
    """The man page of gpusbom's whole command tree."""
    from .app import command

    return render(command())
