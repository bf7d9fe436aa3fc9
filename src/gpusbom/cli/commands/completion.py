"""``gpusbom completion bash|zsh|fish``: print the shell's completion script (click's
``_GPUSBOM_COMPLETE`` protocol, as typer writes it)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from .._common import exits
from ..app import COMPLETE_VAR, app


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command(rich_help_panel="Advanced")
@exits
def completion(
    shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.")],
) -> None:
    """Print the shell completion script. bash: eval "$(gpusbom completion bash)" in
    ~/.bashrc; zsh: gpusbom completion zsh > "${fpath[1]}/_gpusbom"; fish: gpusbom
    completion fish > ~/.config/fish/completions/gpusbom.fish."""
    from typer.completion import get_completion_script  # type: ignore[attr-defined]  # public module

    print(get_completion_script(prog_name="gpusbom", complete_var=COMPLETE_VAR,
                                shell=shell.value))
