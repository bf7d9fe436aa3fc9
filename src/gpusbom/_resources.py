"""Reading gpusbom's own package data files.

``importlib.resources.files(pkg).joinpath(name).read_text()`` imports ``importlib.readers``
and with it ``zipfile`` on its first call (4-10 ms of every scan on the 2-core VM, which reads
the catalog tables and the advisory snapshot). :func:`read_text` (and :func:`read_bytes`)
open the file beside the package's ``__init__`` when it is there (an installed or source
tree), with the same decoding and newline translation, and ask ``importlib.resources``
otherwise (a zip import, a namespace package).
"""

from __future__ import annotations

import importlib
import os


def read_text(package: str, name: str) -> str:
    """The text of data file ``name`` (``/``-separated) of ``package``, as UTF-8."""
    init = getattr(importlib.import_module(package), "__file__", None)
    if init:
        path = os.path.join(os.path.dirname(init), *name.split("/"))
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    from importlib import resources

    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def read_bytes(package: str, name: str) -> bytes:
    """The bytes of data file ``name`` (``/``-separated) of ``package``."""
    init = getattr(importlib.import_module(package), "__file__", None)
    if init:
        path = os.path.join(os.path.dirname(init), *name.split("/"))
        if os.path.isfile(path):
            with open(path, "rb") as f:
                return f.read()
    from importlib import resources

    return resources.files(package).joinpath(name).read_bytes()
