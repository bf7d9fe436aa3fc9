"""Vendor advisories (NVIDIA, Intel, AMD, PyTorch...) matched against scanned components.

- ``db``: the curated records (``advisories/*.json`` in the repository, bundled into
  ``gpusbom/data/advisories.json``), loading and validation;
- ``versions``: version schemes (deb, rpm, PEP 440, NVIDIA driver branches, Intel, semver);
- ``matcher``: components -> ``Finding``s (affected / review / not-affected);
- ``importers``: CSAF 2.0 (NVIDIA), CVE JSON 5, OSV.
"""
