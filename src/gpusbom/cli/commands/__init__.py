"""Command modules: each file here registers its commands on ``gpusbom.cli.app.app`` when
imported (``from ..app import app`` then ``@app.command()`` or ``app.add_typer(...)``).

``app.py`` imports every module of this package once, in name order. Keep module-level
imports cheap (typer and the standard library only): import the library code a command
needs inside the command function, so ``gpusbom scan`` does not pay for ``gpusbom gate``.
Map errors to exit codes with ``.._common.fail`` (its table, ``exit_code``) only.
"""
