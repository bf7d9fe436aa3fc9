"""Declared licence strings -> SPDX expressions (gpusbom.licenses)."""

from __future__ import annotations

import pytest
from license_expression import get_spdx_licensing

from gpusbom.licenses import declared_expression, to_expression


@pytest.mark.parametrize("declared, expected", [
    # Debian copyright short names
    ("Expat", "MIT"),
    ("Apache-2", "Apache-2.0"),
    ("BSL-1", "BSL-1.0"),
    ("BSD-3-clause or Expat", "BSD-3-Clause OR MIT"),
    ("GPL-2+", "GPL-2.0-or-later"),
    ("LGPL-2.1", "LGPL-2.1-only"),
    ("public-domain", "LicenseRef-public-domain"),
    # Fedora / RPM tags
    ("GPLv2+ and LGPLv2+", "GPL-2.0-or-later AND LGPL-2.0-or-later"),
    ("ASL 2.0", "Apache-2.0"),
    ("MIT and BSD", "MIT AND LicenseRef-BSD"),
    # Python metadata
    ("Apache-2.0 WITH LLVM-exception", "Apache-2.0 WITH LLVM-exception"),
    ("(MIT OR Apache-2.0) AND Zlib", "(MIT OR Apache-2.0) AND Zlib"),
    # no SPDX id: a LicenseRef-, as an expression
    ("NVIDIA Proprietary Software", "LicenseRef-NVIDIA-Proprietary-Software"),
    ("LicenseRef-NVIDIA-Proprietary", "LicenseRef-NVIDIA-Proprietary"),
    ("GPL-3+ with OpenSSL exception", "LicenseRef-GPL-3-with-OpenSSL-exception"),
])
def test_to_expression(declared: str, expected: str) -> None:
    got = to_expression(declared)
    assert got == expected
    # every result parses as an SPDX expression
    assert get_spdx_licensing().parse(got, validate=False, strict=True) is not None


def test_declarations_are_anded() -> None:
    assert declared_expression(["Expat", "BSD-3-clause", "Khronos"]) == (
        "MIT AND BSD-3-Clause AND LicenseRef-Khronos")
    assert declared_expression(["MIT", "Expat"]) == "MIT"
    assert declared_expression(["", "  "]) is None


def test_non_dep5_copyright_files() -> None:
    """libc6's free-form copyright file points at /usr/share/common-licenses."""
    from gpusbom.collectors.dpkg import parse_copyright_licenses

    text = ("This is the Debian prepackaged version of the GNU C Library.\n\n"
            "On Debian systems, the complete text of the GNU Lesser General Public\n"
            "License can be found in `/usr/share/common-licenses/LGPL-2.1'.\n"
            "... can be found in `/usr/share/common-licenses/GPL-2'.\n")
    assert parse_copyright_licenses(text) == ["LGPL-2.1", "GPL-2"]
    dep5 = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
            "Files: *\nCopyright: x\nLicense: Expat\n")
    assert parse_copyright_licenses(dep5) == ["Expat"]
    assert parse_copyright_licenses("no licence named here\n") == []
