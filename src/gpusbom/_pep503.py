"""PEP 503's name normalisation, without importing ``packaging.utils``.

``packaging.utils`` imports ``packaging.tags`` (with ``sysconfig``, the manylinux and musllinux
probes and an ELF reader) for its wheel-filename helpers: 5-8 ms of every scan on a 2-core VM,
where only ``canonicalize_name`` is used. This is that function (``validate=False``): runs of
``-``, ``_`` and ``.`` become one ``-``, the name lower-cased, as ``re.sub(r"[-_.]+", "-",
name).lower()``; ``tests/collectors/test_pep503.py`` checks it against ``packaging``'s.
"""

from __future__ import annotations

__all__ = ["canonicalize_name"]


def canonicalize_name(name: str) -> str:
    """The normalised form of a Python distribution (or extra) name (PEP 503)."""
    value = name.lower().replace("_", "-").replace(".", "-")
    while "--" in value:
        value = value.replace("--", "-")
    return value
