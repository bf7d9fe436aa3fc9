"""``gpusbom._pep503.canonicalize_name`` is ``packaging.utils.canonicalize_name`` (gpusbom no
longer imports ``packaging.utils`` on a scan's path) on real distribution names and odd ones."""

from __future__ import annotations

import random
from importlib import metadata

from packaging.utils import canonicalize_name as packaging_name

from gpusbom._pep503 import canonicalize_name


def test_same_as_packaging() -> None:
    names = [d.metadata["Name"] or "" for d in metadata.distributions()]
    assert len(names) > 20
    names += ["Django", "oslo.concurrency", "A__B..C--D", "-_.", "", "x", "İstanbul_Lib",
              "Torch-CU12", "nvidia_cublas_cu12", "a-.-_b", "ÄÖ.Ü", "--lead", "trail__"]
    rng = random.Random(0)
    names += ["".join(rng.choice("aZ9-_.İß ") for _ in range(rng.randint(0, 12)))
              for _ in range(5000)]
    for n in names:
        assert canonicalize_name(n) == str(packaging_name(n)), n
