"""Grouped ``--help``: each option under its help panel (typer's ``rich_help_panel``:
Image, Host, Outputs, Advisories, Advanced), in plain text as click formats it (gpusbom
renders help without rich markup: ``rich_markup_mode=None``)."""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

#: the order panels are shown in; options without a panel are under "Options", first
ORDER = ("Options", "Image", "Host", "Outputs", "Advisories", "Advanced")
#: each panel's section title
TITLES = {"Options": "Options", "Image": "Image options", "Host": "Host options",
          "Outputs": "Output options", "Advisories": "Advisory options",
          "Advanced": "Advanced options"}


class PanelCommand(TyperCommand):
    """A typer command whose help lists its options panel by panel."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args: list[tuple[str, str]] = []
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            rv = param.get_help_record(ctx)
            if rv is None:
                continue
            if param.param_type_name == "argument":
                args.append(rv)
            else:
                panel = getattr(param, "rich_help_panel", None) or "Options"
                panels.setdefault(panel, []).append(rv)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        rank = {name: i for i, name in enumerate(ORDER)}
        for name in sorted(panels, key=lambda n: (rank.get(n, len(ORDER)), n)):
            with formatter.section(TITLES.get(name, name)):
                formatter.write_dl(panels[name])


def group_help(cmd: Any) -> None:
    """Every command below ``cmd`` (a click command or group) gets panel help, where one of
    its options names a panel."""
    subs = getattr(cmd, "commands", None)
    if subs is not None:
        for sub in subs.values():
            group_help(sub)
    elif type(cmd) is TyperCommand and any(getattr(p, "rich_help_panel", None)
                                           for p in cmd.params):
        cmd.__class__ = PanelCommand  # adds no state: only how help is formatted
