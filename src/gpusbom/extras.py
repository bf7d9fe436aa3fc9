"""Optional extras: what ``pip install gpusbom[EXTRA]`` adds, and the one check that a
feature's extra is installed (:func:`require`).

``pip install gpusbom`` is enough to scan, write SBOMs, match advisories, ``check`` and
``gate``. The fleet inventory (``gpusbom inventory``, ``scan --push``, ``crawl``) needs
``gpusbom[inventory]``; the smoke-test kernels (``gpusbom probe``, ``scan --probe``) need
``gpusbom[probe]``; ``gpusbom[all]`` is both.
"""

from __future__ import annotations

import importlib.util

from .errors import MissingExtraError

#: extra -> the import names of its distributions (pyproject's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "inventory": ("sqlalchemy", "alembic", "psycopg", "starlette", "uvicorn",
                  "prometheus_client"),
    "probe": ("pyopencl", "numpy", "vulkan"),
}

#: extra -> what needs it, for the message
FEATURES = {
    "inventory": "the fleet inventory (gpusbom inventory, scan --push, crawl)",
    "probe": "the smoke-test probe (gpusbom probe, scan --probe)",
}

_OK: set[str] = set()


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported (not installed)."""
    out = []
    for mod in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(mod)
    return out


def require(extra: str) -> None:
    """Raise :class:`MissingExtraError` (one line naming the ``pip install`` to run) unless
    every module of ``extra`` is installed."""
    if extra in _OK:
        return
    gone = missing(extra)
    if gone:
        raise MissingExtraError(
            f"{FEATURES[extra]} needs the '{extra}' extra ({', '.join(gone)} not installed): "
            f"pip install 'gpusbom[{extra}]'")
    _OK.add(extra)
