"""CUDA toolkit releases vs the versions of their components.

Advisories name toolkit releases ("CUDA Toolkit 12.8", "up to 12.9"); images often carry
only components (``libcudart.so.12.4.127``, a cuBLAS wheel 12.4.5.8) and no toolkit root.
``RELEASES`` maps a release to its components' versions, from sources that state both
(each row cites its source; only verified rows are listed, none guessed):

- 12.4.1 and 11.8.0: Debian's repackaging of NVIDIA's toolkit (source package
  ``nvidia-cuda-toolkit`` 12.4.1-2 in trixie non-free, 11.8.0-5~deb12u1 in bookworm
  non-free) versions every binary package ``<component version>~<toolkit release>``,
  e.g. ``libcudart12 12.4.127~12.4.1-2``, ``libcublas12 12.4.5.8~12.4.1-2``
  (read with apt-cache madison, 2026-11-29).

For a component missing from the table, ``cudart``, ``nvcc``, ``nvrtc``, ``nvjitlink``
and ``cupti`` still carry their toolkit's major.minor (``12.4.127`` belongs to a 12.4.x
release), so the matcher can decide whenever every 12.4.x release gets the same verdict,
and reports ``review`` otherwise. The math libraries (cuBLAS, cuFFT, ...) have their own
numbering: only the table relates them to a release.
"""

from __future__ import annotations

from dataclasses import dataclass

from .versions import InvalidVersion, parse

__all__ = ["COMPONENTS", "RELEASES", "SOURCES", "ReleaseGuess", "release_of"]

RELEASES: dict[str, dict[str, str]] = {
    "12.4.1": {
        "cudart": "12.4.127", "nvcc": "12.4.131", "nvrtc": "12.4.127", "nvjitlink": "12.4.127",
        "cupti": "12.4.127", "cublas": "12.4.5.8", "cufft": "11.2.1.3", "curand": "10.3.5.147",
        "cusolver": "11.6.1.9", "cusparse": "12.3.1.170",
    },
    "11.8.0": {
        "cudart": "11.8.89", "nvcc": "11.8.89", "nvrtc": "11.8.89", "cupti": "11.8.87",
        "cublas": "11.11.3.6", "cufft": "10.9.0.58", "curand": "10.3.0.86",
        "cusolver": "11.4.1.48", "cusparse": "11.7.5.86",
    },
}
SOURCES = {
    "12.4.1": "Debian source package nvidia-cuda-toolkit 12.4.1-2 (trixie, non-free): binary "
              "package versions <component>~12.4.1",
    "11.8.0": "Debian source package nvidia-cuda-toolkit 11.8.0-5~deb12u1 (bookworm, "
              "non-free): binary package versions <component>~11.8.0",
}
#: components whose version starts with their toolkit's major.minor
MAJOR_MINOR_COMPONENTS = ("cudart", "nvcc", "nvrtc", "nvjitlink", "cupti")
COMPONENTS = tuple(sorted({p for row in RELEASES.values() for p in row}
                          | set(MAJOR_MINOR_COMPONENTS)))


@dataclass(frozen=True)
class ReleaseGuess:
    """The toolkit release(s) a component version belongs to: ``release`` when exact,
    else ``lowest``/``highest`` bound the release line (``12.4`` .. ``12.4.99999``)."""

    release: str | None
    lowest: str | None = None
    highest: str | None = None
    how: str = ""


_INDEX: dict[tuple[str, tuple[int, ...]], str] = {}
for _rel, _row in RELEASES.items():
    for _prod, _ver in _row.items():
        _INDEX[(_prod, parse("numeric", _ver))] = _rel


def release_of(product: str, version: str | None) -> ReleaseGuess | None:
    """The toolkit release of ``product`` at ``version``; None when nothing can be said."""
    if not version:
        return None
    try:
        key = parse("numeric", version.split("+", 1)[0])
    except InvalidVersion:
        return None
    rel = _INDEX.get((product, key))
    if rel is not None:
        return ReleaseGuess(rel, how=f"{product} {version} ships with CUDA {rel} "
                                      f"({SOURCES[rel]})")
    if product in MAJOR_MINOR_COMPONENTS and len(key) >= 2:
        mm = f"{key[0]}.{key[1]}"
        return ReleaseGuess(None, lowest=mm, highest=f"{mm}.99999",
                            how=f"{product} {version} belongs to a CUDA {mm}.x release")
    return None
