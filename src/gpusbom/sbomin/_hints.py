"""The ecosystem of a declared component that has no purl, from the producing tool's own
properties: Syft writes no purl for a deb when it found no os-release (it cannot name
the distribution) but still says ``syft:package:type: deb`` and which cataloger found
it (``syft:package:foundBy: dpkg-db-cataloger``); Trivy says
``aquasecurity:trivy:PkgType``. The component is then matched by name in that ecosystem
(an NVIDIA driver deb is the driver), as a purl would have it."""

from __future__ import annotations

__all__ = ["ecosystem_hint"]

_SYFT_TYPES = {"deb": "deb", "rpm": "rpm", "apk": "apk", "python": "pypi", "conda": "conda",
               "go-module": "golang", "npm": "npm"}
_SYFT_CATALOGERS = {"dpkg-db-cataloger": "deb", "dpkgdb-cataloger": "deb",
                    "rpm-db-cataloger": "rpm", "rpmdb-cataloger": "rpm",
                    "apk-db-cataloger": "apk", "apkdb-cataloger": "apk",
                    "python-installed-package-cataloger": "pypi",
                    "python-package-cataloger": "pypi", "conda-meta-cataloger": "conda",
                    "go-module-binary-cataloger": "golang"}
_TRIVY_TYPES = {"debian": "deb", "ubuntu": "deb", "redhat": "rpm", "centos": "rpm",
                "rocky": "rpm", "alma": "rpm", "amazon": "rpm", "fedora": "rpm",
                "oracle": "rpm", "suse": "rpm", "photon": "rpm", "alpine": "apk",
                "python-pkg": "pypi", "conda-pkg": "conda", "gobinary": "golang"}


def ecosystem_hint(properties: dict[str, str]) -> str | None:
    """gpusbom's ecosystem for the tool's package type, None when none is said. The
    properties as the reader keeps them: the tool's names, prefixed ``sbom:`` or not."""
    properties = {k.removeprefix("sbom:"): v for k, v in properties.items()}
    t = properties.get("syft:package:type")
    if t and t.lower() in _SYFT_TYPES:
        return _SYFT_TYPES[t.lower()]
    by = properties.get("syft:package:foundBy")
    if by and by.lower() in _SYFT_CATALOGERS:
        return _SYFT_CATALOGERS[by.lower()]
    tt = properties.get("aquasecurity:trivy:PkgType")
    if tt and tt.lower() in _TRIVY_TYPES:
        return _TRIVY_TYPES[tt.lower()]
    return None
