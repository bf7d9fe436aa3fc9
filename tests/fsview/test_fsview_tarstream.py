"""Our tar parser on archives written by the stdlib tarfile (and hand-made hostile ones)."""

from __future__ import annotations

import io
import tarfile
import time

import pytest
from fsview_util import D, F, H, L, make_tar
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusbom.errors import LayerError, UnsafeArchiveError
from gpusbom.fsview import EntryKind, Limits, iter_tar

LONG = "usr/" + "/".join(f"dir{i:03d}-{'x' * 40}" for i in range(6)) + "/file.txt"  # > 255 chars
LONG_LINK = "/opt/" + "t" * 200 + "/target"


def members(data: bytes, limits: Limits | None = None, f: object = None) -> list[tuple]:
    out = []
    src = f if f is not None else io.BytesIO(data)
    for m in iter_tar(src, limits=limits or Limits(), name="test.tar"):  # type: ignore[arg-type]
        out.append((m.name, m.kind, m.size, m.linkname, m.read()))
    return out


class NonSeekable(io.RawIOBase):
    """A forward-only stream that returns short reads."""

    def __init__(self, data: bytes, step: int = 777) -> None:
        self._b = io.BytesIO(data)
        self._step = step

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            return self._b.read()
        return self._b.read(min(n, self._step))


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_formats_roundtrip(fmt: int) -> None:
    items = [
        D("usr"),
        F("usr/a.txt", b"hello\n"),
        F("usr/big.bin", bytes(range(256)) * 1000),
        L("usr/link", "a.txt"),
        H("usr/hard", "usr/a.txt"),
        F("usr/empty", b""),
    ]
    got = members(make_tar(items, fmt))
    assert [g[0] for g in got] == [
        "usr/",
        "usr/a.txt",
        "usr/big.bin",
        "usr/link",
        "usr/hard",
        "usr/empty",
    ]
    assert got[1][1] is EntryKind.FILE and got[1][4] == b"hello\n"
    assert got[2][4] == bytes(range(256)) * 1000
    assert got[0][1] is EntryKind.DIR
    assert got[3][1] is EntryKind.SYMLINK and got[3][3] == "a.txt"
    assert got[4][1] is EntryKind.HARDLINK and got[4][3] == "usr/a.txt"
    assert got[5][2] == 0 and got[5][4] == b""


def test_ustar_prefix_split() -> None:
    name = "a" * 120 + "/" + "b" * 90  # fits ustar only with the prefix field
    got = members(make_tar([F(name, b"x")], tarfile.USTAR_FORMAT))
    assert got[0][0] == name


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_long_names_and_links(fmt: int) -> None:
    data = make_tar([F(LONG, b"data"), L("usr/l", LONG_LINK), H("usr/h" + "z" * 120, LONG)], fmt)
    got = members(data)
    assert got[0][0] == LONG and got[0][4] == b"data"
    assert got[1][3] == LONG_LINK
    assert got[2][0] == "usr/h" + "z" * 120 and got[2][3] == LONG


def test_pax_unicode_and_size_override() -> None:
    name = "usr/share/dóc/ünïcode-文件.txt"
    got = members(make_tar([F(name, b"abc")], tarfile.PAX_FORMAT))
    assert got[0][0] == name and got[0][4] == b"abc"


def test_pax_global_header_applies() -> None:
    buf = io.BytesIO()
    with tarfile.open(
        fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": "global"}
    ) as tf:
        ti = tarfile.TarInfo("a")
        ti.size = 1
        tf.addfile(ti, io.BytesIO(b"1"))
    got = members(buf.getvalue())
    assert got == [("a", EntryKind.FILE, 1, "", b"1")]


def test_gnu_base256_numbers() -> None:
    ti = tarfile.TarInfo("big-uid")
    ti.uid = 0o10000000  # does not fit 7 octal digits: GNU writes base-256
    ti.size = 3
    hdr = ti.tobuf(tarfile.GNU_FORMAT)
    assert hdr[108] & 0x80
    data = hdr + b"abc".ljust(512, b"\0") + bytes(1024)
    ms = list(iter_tar(io.BytesIO(data), limits=Limits(), name="t"))
    assert ms[0].uid == 0o10000000 and ms[0].size == 3


def test_partial_reads_and_non_seekable_skip() -> None:
    items = [F(f"f{i}", bytes([i]) * (i * 300)) for i in range(20)]
    data = make_tar(items)
    # read only every other member; the rest is skipped by reading
    out = []
    for m in iter_tar(NonSeekable(data), limits=Limits(), name="t"):  # type: ignore[arg-type]
        assert m.data_offset is None
        if int(m.name[1:]) % 2 == 0:
            first = m.read(5)
            out.append(first + m.read())
    assert out == [bytes([i]) * (i * 300) for i in range(0, 20, 2)]


def test_seekable_data_offset() -> None:
    data = make_tar([F("a", b"A" * 1000), F("b", b"B" * 10)])
    f = io.BytesIO(data)
    offs = {m.name: (m.data_offset, m.size) for m in iter_tar(f, limits=Limits(), name="t")}
    for n, (off, size) in offs.items():
        assert off is not None
        assert data[off : off + size] == n.upper().encode() * size


def test_eof_at_header_boundary_is_end() -> None:
    data = make_tar([F("a", b"x" * 600)])
    stripped = data[: 512 + 1024]  # header + padded data, no end marker
    assert [m[0] for m in members(stripped)] == ["a"]
    assert members(b"") == []


def test_truncated_in_data() -> None:
    data = make_tar([F("usr/lib/a.so", b"x" * 5000)])
    with pytest.raises(LayerError, match=r"test.tar: truncated tar \(entry usr/lib/a.so\)"):
        members(data[:2000])


def test_truncated_in_data_when_skipping() -> None:
    data = make_tar([F("usr/lib/a.so", b"x" * 5000), F("b", b"y")])
    with pytest.raises(LayerError, match="truncated tar"):
        for _ in iter_tar(NonSeekable(data[:3000]), limits=Limits(), name="t"):  # type: ignore[arg-type]
            pass


def test_truncated_in_header() -> None:
    data = make_tar([F("a", b"x"), F("b", b"y")])
    with pytest.raises(LayerError, match=r"truncated tar \(entry a\)"):
        members(data[: 1024 + 100])


def test_bad_checksum() -> None:
    data = bytearray(make_tar([F("a", b"x"), F("b", b"y")]))
    data[1024 + 5] ^= 0x20  # flip a bit in the second header's name
    with pytest.raises(LayerError, match="bad tar header checksum at offset 1024"):
        members(bytes(data))


def test_garbage_is_not_a_tar() -> None:
    with pytest.raises(LayerError, match="checksum"):
        members(b"this is not a tar file at all" * 40)


def _raw_header(name: bytes, typeflag: bytes, size: int, size_field: bytes | None = None) -> bytes:
    h = bytearray(512)
    h[0 : len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = size_field if size_field is not None else b"%011o\0" % size
    h[136:148] = b"00000000000\0"
    h[156:157] = typeflag
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    h[148:156] = b"        "
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def test_huge_pax_header_rejected_without_allocating() -> None:
    size_field = b"\x80" + (10 * 10**9).to_bytes(11, "big")  # 10 GB, base-256
    data = _raw_header(b"././@PaxHeader", b"x", 0, size_field) + bytes(512)
    t0 = time.perf_counter()
    with pytest.raises(UnsafeArchiveError, match=r"x extended header of 10000000000 bytes exceeds"):
        members(data)
    assert time.perf_counter() - t0 < 1.0


def test_long_gnu_name_over_limits() -> None:
    data = make_tar([F("a/" * 3000 + "f", b"x")], tarfile.GNU_FORMAT)
    with pytest.raises(UnsafeArchiveError, match="exceeds the limit of 4096"):
        members(data)
    with pytest.raises(UnsafeArchiveError, match="header of .* bytes exceeds"):
        members(data, Limits(max_header_bytes=1000))


def test_pax_path_over_limit() -> None:
    data = make_tar([F("d/" * 100 + "f", b"x")], tarfile.PAX_FORMAT)
    with pytest.raises(UnsafeArchiveError, match="path of 201 characters exceeds the limit of 100"):
        members(data, Limits(max_path_length=100))


def test_malformed_pax_record() -> None:
    body = b"99 path=foo\n"
    data = (
        _raw_header(b"pax", b"x", len(body))
        + body.ljust(512, b"\0")
        + _raw_header(b"a", b"0", 0)
        + bytes(1024)
    )
    with pytest.raises(LayerError, match="malformed pax header"):
        members(data)


def test_too_many_entries() -> None:
    data = make_tar([F(f"f{i}", b"") for i in range(11)])
    assert len(members(data, Limits(max_entries_per_layer=11))) == 11
    with pytest.raises(UnsafeArchiveError, match="more than 10 entries"):
        members(data, Limits(max_entries_per_layer=10))


def test_endless_extended_header_chain() -> None:
    body = b"11 path=aa\n"
    one = _raw_header(b"pax", b"x", len(body)) + body.ljust(512, b"\0")
    with pytest.raises(UnsafeArchiveError, match="extended headers in a row"):
        members(one * 100 + bytes(1024))


def test_gnu_sparse_reported_as_sparse_file() -> None:
    # old GNU sparse member: 'S' typeflag, stored data of 4 bytes, no extension blocks
    data = _raw_header(b"sparse.bin", b"S", 4) + b"abcd".ljust(512, b"\0") + bytes(1024)
    ms = list(iter_tar(io.BytesIO(data), limits=Limits(), name="t"))
    assert len(ms) == 1 and ms[0].sparse and ms[0].kind is EntryKind.FILE


def test_negative_or_bad_numbers() -> None:
    data = _raw_header(b"a", b"0", 0, b"12x4\0\0\0\0\0\0\0\0") + bytes(1024)
    with pytest.raises(LayerError, match="bad size field"):
        members(data)


def test_single_zero_block_then_garbage_ends() -> None:
    data = make_tar([F("a", b"x")])
    # tarfile pads the archive; end after the first zero block, ignore what follows
    cut = data[: 1024 + 512] + b"junk"
    assert [m[0] for m in members(cut)] == ["a"]


_name = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\0"),
    min_size=1,
    max_size=40,
).filter(lambda s: s not in (".", ".."))


@settings(max_examples=40, deadline=None)
@given(
    files=st.lists(
        st.tuples(st.lists(_name, min_size=1, max_size=8), st.binary(max_size=3000)),
        max_size=12,
    ),
    fmt=st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]),
)
def test_agrees_with_tarfile(files: list[tuple[list[str], bytes]], fmt: int) -> None:
    items = [F("/".join(parts), data) for parts, data in files]
    try:
        data = make_tar(items, fmt)
    except (ValueError, UnicodeEncodeError):  # not representable in this format
        return
    want = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for ti in tf:
            f = tf.extractfile(ti)
            want.append((ti.name, f.read() if f else b""))
    got = [(m[0], m[4]) for m in members(data, f=NonSeekable(data, 333))]
    assert got == want
