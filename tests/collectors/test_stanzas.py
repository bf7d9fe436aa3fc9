"""``collectors/_stanzas.py`` gives exactly python-debian's paragraphs (the oracle:
``Deb822.iter_paragraphs(..., use_apt_pkg=False)``) on real deb822 files of this machine and of
the repository's host fixtures, and on odd input: CRLF and lone CR line ends, comments,
whitespace-only separators, Unicode whitespace and line breaks, inline PGP armour, duplicate
keys in two cases, fields without a value, and text after a paragraph with no field."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from debian import deb822

from gpusbom.collectors._stanzas import iter_paragraphs
from gpusbom.collectors.dpkg import _lines

ROOT = Path(__file__).resolve().parents[2]
REAL = [
    Path("/var/lib/dpkg/status"),
    ROOT / "fixtures/hosts/h200/var/lib/dpkg/status",
    ROOT / "fixtures/hosts/cpu-only/var/lib/dpkg/status",
]


def _oracle(lines: object) -> list[dict[str, str]] | str:
    try:
        return [{k.lower(): p[k] for k in p}
                for p in deb822.Deb822.iter_paragraphs(lines, use_apt_pkg=False)]
    except ValueError as e:
        return f"ValueError: {e}"


def _ours(lines: object) -> list[dict[str, str]] | str:
    try:
        return list(iter_paragraphs(lines))  # type: ignore[arg-type]
    except ValueError as e:
        return f"ValueError: {e}"


def _both_ways(data: bytes) -> None:
    """As parse_dpkg_status feeds them: text lines of bytes, and a streamed binary file."""
    assert _ours(_lines(data)) == _oracle(_lines(data))
    assert _ours(_lines(io.BytesIO(data))) == _oracle(_lines(io.BytesIO(data)))


@pytest.mark.parametrize("path", REAL, ids=lambda p: str(p))
def test_real_status_files(path: Path) -> None:
    assert path.is_file(), path  # CI runs on Debian: the machine's own status file exists
    data = path.read_bytes()
    paras = _ours(_lines(data))
    assert isinstance(paras, list) and len(paras) > 50
    assert any("\n" in p.get("description", "") for p in paras)  # multi-line fields
    _both_ways(data)


def test_real_copyright_files() -> None:
    """DEP-5 copyright files: comments, blank-looking lines, long multi-line licence texts."""
    files = sorted(Path("/usr/share/doc").glob("*/copyright"))[:300]
    assert len(files) > 50
    for f in files:
        _both_ways(f.read_bytes())


ODD = [
    b"Package: a\r\nVersion: 1\r\nDescription: x\r\n more\r\n\r\nPackage: b\r\nVersion: 2\r\n",
    b"Package: a\rVersion: 1\r\rPackage: b\rVersion: 2\r",
    b"# comment\nPackage: a\n# inside\nVersion: 1\n \t \nPackage: b\nVersion: 2\n",
    b"\n\n \n\t\nPackage: a\nVersion: 1\n\n\n\n   \nPackage: b\n",
    b"Package: a\nVersion: 1 \xc2\xa0\nDescription: \xc2\xa0x\n\xc2\xa0cont\n \xc2\xa0\n .\n",
    b"Package: a\nDescription: x\n\x0bbad\n",
    b"Package: a\nDescription: x\n \x0c ok\n",
    b"Package: a\nDescription: x\n\xe2\x80\xa8 line\n",
    b"Package: a\nDescription: x\n \xc2\x85y\n",
    b"Package: a\nPACKAGE: b\npackage:c\nVersion:\nStatus :  install ok installed  \n",
    b"Package: a\ngarbage line\nVersion: 1\n\nno field here\n\nPackage: c\n",
    b"Package: a\nVersion: 1\n\n:\n\nPackage: c\n",
    b"-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nPackage: a\nVersion: 1\n\n"
    b"Package: b\n-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n"
    b"Package: c\n",
    b"Package: a\n-----BEGIN PGP SIGNATURE-----\nVersion: 9\n-----END PGP SIGNATURE-----\n",
    b"Package: a\n---- not armour\nVersion: 1\n",
    b"Package: \xff\xfe bad utf-8\nVersion: 1\n",
    b"Package: a\nDepends: b,\n c (>= 1),\n\td | e\nConffiles:\n /etc/x 0123\n /etc/y 4567 obsolete\n",
    b"Package:a\tb  \nVersion:\t1\n\tcont\n",
    b"\xc2\xa0Key: v\nPackage: a\n \xc2\xa0x: y\n\tKey: v\n\n#c\n\n# c\n \nPackage: b\n",
    b"Package: a\n-----BEGIN PGP SIGNED MESSAGE-----\n\nVersion: 1\n \n\nPackage: b\n",
    b"",
    b"\n\n",
]


@pytest.mark.parametrize("data", ODD, ids=range(len(ODD)))
def test_odd_input(data: bytes) -> None:
    _both_ways(data)


def _dep5_oracle(text: str) -> list[str]:
    """``parse_dep5_licenses`` as it was written on python-debian's parser."""
    out: list[str] = []
    for i, para in enumerate(deb822.Deb822.iter_paragraphs(text.splitlines(True),
                                                           use_apt_pkg=False)):
        if i > 0 and "Files" not in para:
            continue
        lic = (para.get("License") or "").split("\n", 1)[0].strip()
        if lic and lic not in out:
            out.append(lic)
    return out


def test_dep5_licenses_as_python_debian() -> None:
    """The copyright files' licences (``dpkg.parse_dep5_licenses``, now on ``_stanzas``) are
    python-debian's, on this machine's DEP-5 files and on odd ones."""
    from gpusbom.collectors.dpkg import parse_dep5_licenses

    fmt = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
    texts = [f.read_bytes().decode("utf-8", "replace")
             for f in sorted(Path("/usr/share/doc").glob("*/copyright"))]
    dep5 = [t for t in texts if t.lstrip().startswith("Format:")]
    assert len(dep5) > 50
    odd = [fmt + "License: A\n\nfiles: *\nLICENSE: B\n more\n\nFiles: x\nLicense:  C or D \n",
           fmt + "\nComment: no files\nLicense: E\n\nFiles: *\nLicense: A\n\nLicense: F\n",
           fmt + "License: A\n# c\n\n \nFiles: *\nLicense:\n text\n\nno field\n\nFiles: y\n"
           "License: G\n", fmt + "Files: *\nLicense: A\nLicense: H\n"]
    for text in dep5 + odd:
        assert parse_dep5_licenses(text) == _dep5_oracle(text)
    assert parse_dep5_licenses(odd[0]) == ["A", "B", "C or D"]
