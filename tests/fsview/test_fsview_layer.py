"""read_layer: compression by magic bytes, digests, limits, path safety, capture, whiteouts."""

from __future__ import annotations

import io
import os
import tarfile
import time

import pytest
import zstandard
from fsview_util import ALL, D, F, H, L, Progress, gz, make_tar, read, sha, zst

from gpusbom.errors import DigestMismatchError, LayerError, UnsafeArchiveError
from gpusbom.fsview import (
    EntryKind,
    Limits,
    NullProgress,
    PathMatcher,
    PathSpec,
    Spool,
    open_decompressed,
    read_layer,
)

BASIC = [
    D("etc"),
    F("etc/os-release", b"ID=ubuntu\nVERSION_ID=22.04\n"),
    F("usr/bin/python3", b"\x7fELF" + bytes(5000)),
    L("usr/bin/python", "python3"),
]


@pytest.mark.parametrize("threaded", [True, False])
@pytest.mark.parametrize("comp", ["tar", "gzip", "zstd"])
def test_compressions(comp: str, threaded: bool) -> None:
    tar = make_tar(BASIC)
    blob = {"tar": tar, "gzip": gz(tar), "zstd": zst(tar)}[comp]
    li = read(
        blob,
        [PathSpec("/etc/*")],
        threaded=threaded,
        expected_digest=sha(blob),
        expected_diff_id=sha(tar),
    )
    assert li.entries["/etc/os-release"].content.read().startswith(b"ID=ubuntu")  # type: ignore[union-attr]
    assert "/usr/bin/python3" not in li.entries  # unmatched: counted only
    assert li.entries["/usr/bin/python"].kind is EntryKind.SYMLINK
    assert li.file_count == 4
    assert li.uncompressed_bytes == len(tar)
    assert li.ref.diff_id == sha(tar)
    assert li.ref.digest == (None if comp == "tar" else sha(blob))


def test_plain_tar_diff_id_computed() -> None:
    tar = make_tar(BASIC)
    li = read(tar)
    assert li.ref.diff_id == sha(tar)


def test_gzip_diff_id_only_when_asked() -> None:
    li = read(gz(make_tar(BASIC)))
    assert li.ref.diff_id is None


def test_concatenated_gzip_members_and_trailing_zeros() -> None:
    tar = make_tar(BASIC + [F(f"x/{i}", os.urandom(3000)) for i in range(50)])
    parts = [gz(tar[i : i + 10000]) for i in range(0, len(tar), 10000)]
    blob = b"".join(parts) + bytes(700)
    li = read(blob, expected_digest=sha(blob), expected_diff_id=sha(tar))
    assert len([e for e in li.entries.values() if e.path.startswith("/x/")]) == 50


def test_multi_frame_zstd() -> None:
    tar = make_tar(BASIC + [F(f"x/{i}", os.urandom(3000)) for i in range(50)])
    c = zstandard.ZstdCompressor()
    blob = b"".join(c.compress(tar[i : i + 20000]) for i in range(0, len(tar), 20000))
    li = read(blob, expected_digest=sha(blob), expected_diff_id=sha(tar))
    assert li.entries["/x/49"].content is not None


@pytest.mark.parametrize("threaded", [True, False])
def test_corrupt_gzip(threaded: bool) -> None:
    blob = bytearray(gz(make_tar([F(f"f{i}", os.urandom(2000)) for i in range(100)])))
    blob[len(blob) // 2 : len(blob) // 2 + 64] = bytes(64)
    with pytest.raises(LayerError, match="^layer7: corrupt gzip"):
        read(bytes(blob), name="layer7", threaded=threaded)


@pytest.mark.parametrize("threaded", [True, False])
def test_truncated_gzip(threaded: bool) -> None:
    blob = gz(make_tar([F(f"f{i}", os.urandom(2000)) for i in range(100)]))
    with pytest.raises(LayerError, match="^layer0: (corrupt gzip|truncated tar)"):
        read(blob[: len(blob) // 2], threaded=threaded)
    # cut inside the trailer only: the tar is complete but the gzip is not
    with pytest.raises(LayerError, match="corrupt gzip"):
        read(blob[:-3], threaded=threaded)


def test_corrupt_zstd() -> None:
    good = zst(make_tar([F(f"f{i}", os.urandom(2000)) for i in range(100)]))
    blob = bytearray(good)
    blob[4] |= 0x08  # reserved bit in the frame header descriptor
    with pytest.raises(LayerError, match="^layer0: corrupt zstd"):
        read(bytes(blob))
    with pytest.raises(LayerError, match="^layer0: corrupt zstd"):
        read(good + b"trailing garbage")


@pytest.mark.parametrize("threaded", [True, False])
def test_truncated_zstd(threaded: bool) -> None:
    blob = zst(make_tar([F(f"f{i}", os.urandom(2000)) for i in range(300)]))
    for cut in (len(blob) // 2, len(blob) - 1, 10, 5):
        with pytest.raises(LayerError, match="^layer0: (corrupt zstd|truncated tar)"):
            read(blob[:cut], threaded=threaded)


def test_zstd_skippable_frame_and_checksum() -> None:
    tar = make_tar(BASIC)
    skippable = b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"hello"
    blob = skippable + zstandard.ZstdCompressor(
        write_checksum=True, write_content_size=False
    ).compress(tar)
    li = read(blob, expected_diff_id=sha(tar))
    assert li.ref.diff_id == sha(tar)


def test_garbage_after_gzip() -> None:
    blob = gz(make_tar(BASIC)) + b"garbage!"
    with pytest.raises(LayerError, match="garbage after the last member"):
        read(blob)


def test_truncated_tar_in_layer() -> None:
    tar = make_tar([F("usr/lib/libfoo.so", os.urandom(20000))])
    with pytest.raises(LayerError, match=r"^layer0: truncated tar \(entry usr/lib/libfoo.so\)$"):
        read(gz(tar[:9000]))


@pytest.mark.parametrize("threaded", [True, False])
def test_digest_mismatch(threaded: bool) -> None:
    blob = gz(make_tar(BASIC))
    bad = "sha256:" + "0" * 64
    with pytest.raises(
        DigestMismatchError, match=rf"^layer0: digest mismatch: expected {bad}, got {sha(blob)}$"
    ):
        read(blob, expected_digest=bad, threaded=threaded)
    with pytest.raises(DigestMismatchError, match="diff_id mismatch"):
        read(blob, expected_diff_id=bad, threaded=threaded)
    with pytest.raises(DigestMismatchError, match="diff_id mismatch"):
        read(make_tar(BASIC), expected_diff_id=bad, threaded=threaded)


def test_digest_covers_bytes_after_tar_end() -> None:
    tar = make_tar(BASIC) + b"\0" * 4096 + b"trailing bytes after the end marker"
    blob = gz(tar)
    li = read(blob, expected_digest=sha(blob), expected_diff_id=sha(tar))
    assert li.ref.diff_id == sha(tar)


def test_progress_counts_raw_bytes() -> None:
    blob = gz(make_tar(BASIC + [F(f"x/{i}", os.urandom(100000)) for i in range(30)]))
    for threaded in (True, False):
        p = Progress()
        with Spool() as sp:
            read_layer(
                io.BytesIO(blob),
                index=0,
                name="l",
                matcher=PathMatcher(ALL),
                spool=sp,
                limits=Limits(),
                progress=p,
                threaded=threaded,
            )
        assert p.total == len(blob)


def test_path_traversal_rejected() -> None:
    tar = make_tar([F("../../etc/passwd", b"root:x:0:0")])
    with pytest.raises(
        UnsafeArchiveError, match=r"^layer0: entry '../../etc/passwd' escapes the image root$"
    ):
        read(gz(tar))


def test_hardlink_escaping_root_rejected() -> None:
    tar = make_tar([H("usr/x", "../../../etc/shadow")])
    with pytest.raises(UnsafeArchiveError, match="escapes the image root"):
        read(tar)


def test_path_normalisation() -> None:
    tar = make_tar([F("./usr//lib/./a/../b.txt", b"b"), F("/abs/path", b"p"), D("./"), D("a/b/")])
    li = read(tar)
    assert set(li.entries) == {"/usr/lib/b.txt", "/abs/path", "/", "/a/b"}


def test_whiteouts_recorded() -> None:
    tar = make_tar(
        [
            F("etc/.wh.passwd", b""),
            F("opt/app/.wh..wh..opq", b""),
            F(".wh.tmp", b""),
            F("x/.wh..wh.plnk", b""),
        ]
    )
    li = read(tar)
    assert li.whiteouts == {"/etc/passwd", "/tmp"}
    assert li.opaque_dirs == {"/opt/app"}
    assert li.entries == {}


def test_later_entry_replaces_earlier() -> None:
    tar = make_tar([F("etc/a", b"one"), F("etc/a", b"two"), L("etc/b", "a"), F("etc/b", b"file")])
    li = read(tar, [PathSpec("/etc/a")])
    assert li.entries["/etc/a"].content.read() == b"two"  # type: ignore[union-attr]
    assert "/etc/b" not in li.entries  # an unmatched file replaced the link


def test_max_size_and_spooling() -> None:
    big = os.urandom(3 << 20)
    tar = make_tar([F("data/big.bin", big), F("data/huge.bin", big + big), F("data/small", b"s")])
    limits = Limits(max_memory_content=1 << 20)
    with Spool(limits) as sp:
        li = read(gz(tar), [PathSpec("/data/*", max_size=4 << 20)], limits=limits, spool=sp)
        e = li.entries["/data/big.bin"]
        assert e.content is not None and e.content.spooled_path is not None
        assert e.content.spooled_path.startswith(sp.dir)
        assert e.content.read() == big and sp.bytes == len(big)
        huge = li.entries["/data/huge.bin"]
        assert huge.matched and huge.content is None and huge.size == 2 * len(big)
        assert li.entries["/data/small"].content.spooled_path is None  # type: ignore[union-attr]
    assert not os.path.exists(sp.dir)


def test_spool_budget_respected() -> None:
    big = os.urandom(2 << 20)
    tar = make_tar([F("d/a", big), F("d/b", big)])
    limits = Limits(max_memory_content=1 << 20, max_spool_bytes=3 << 20)
    with Spool(limits) as sp:
        li = read(tar, limits=limits, spool=sp)
        assert li.entries["/d/a"].content is not None
        assert li.entries["/d/b"].content is None and li.entries["/d/b"].matched
        assert sp.bytes <= 3 << 20


def test_hardlink_shares_content() -> None:
    tar = make_tar(
        [
            F("usr/lib/libx.so.1", b"ELF"),
            H("usr/lib/libx.so", "usr/lib/libx.so.1"),
            F("opt/unmatched", b"zzz"),
            H("usr/lib/liby.so", "opt/unmatched"),
        ]
    )
    li = read(tar, [PathSpec("/usr/lib/*")])
    link = li.entries["/usr/lib/libx.so"]
    assert link.kind is EntryKind.HARDLINK and link.linkname == "/usr/lib/libx.so.1"
    assert link.content is li.entries["/usr/lib/libx.so.1"].content
    other = li.entries["/usr/lib/liby.so"]
    assert other.matched and other.content is None


def test_bomb_rejected_by_ratio_and_size() -> None:
    # ~1.1 GiB of zeros inside one tar member, compressed while streaming
    import zlib

    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    n = (1 << 30) + (64 << 20)
    hdr = tarfile.TarInfo("zeros")
    hdr.size = n
    parts = [c.compress(hdr.tobuf(tarfile.GNU_FORMAT))]
    block = bytes(8 << 20)
    for _ in range(n // len(block)):
        parts.append(c.compress(block))
    parts.append(c.flush())
    blob = b"".join(parts)
    assert len(blob) < n // 150
    t0 = time.perf_counter()
    with pytest.raises(UnsafeArchiveError, match="compression ratio above 100:1"):
        read(blob, [], limits=Limits(max_compression_ratio=100))
    assert time.perf_counter() - t0 < 30
    with pytest.raises(UnsafeArchiveError, match="decompressed size exceeds the limit of 1000000"):
        read(
            gz(make_tar([F("a", bytes(2_000_000))])),
            [],
            limits=Limits(max_layer_uncompressed=1_000_000),
        )


def test_too_many_entries_in_layer() -> None:
    tar = gz(make_tar([F(f"f{i}", b"") for i in range(30)]))
    with pytest.raises(UnsafeArchiveError, match="^layer0: more than 20 entries"):
        read(tar, limits=Limits(max_entries_per_layer=20))


def test_too_many_kept_records() -> None:
    tar = make_tar([D(f"d{i}") for i in range(30)])
    with pytest.raises(UnsafeArchiveError, match="kept records"):
        read(tar, limits=Limits(max_kept_records=10))


def test_unmatched_files_not_kept() -> None:
    tar = make_tar(
        [F(f"usr/share/doc/f{i}", b"x") for i in range(2000)] + [F("etc/os-release", b"ID=x")]
    )
    li = read(gz(tar), [PathSpec("/etc/os-release")])
    assert set(li.entries) == {"/etc/os-release"}
    assert li.file_count == 2001
    assert len(li.shadow_hashes) == 2000


def test_open_decompressed_stream_api() -> None:
    tar = make_tar(BASIC)
    for blob in (tar, gz(tar), zst(tar)):
        s = open_decompressed(io.BytesIO(blob), "x")
        assert s.read(10) == tar[:10]
        assert s.skip(100) == 100
        assert s.read() == tar[110:]
        assert s.read(5) == b""
        s.close()


def test_threaded_stream_closed_early_stops_workers() -> None:
    blob = gz(os.urandom(30 << 20))
    s = open_decompressed(
        io.BytesIO(blob), "x", raw_digest="sha256", out_digest="sha256", threaded=True
    )
    assert len(s.read(1000)) == 1000
    # close() empties the list: keep the threads to look at them afterwards
    threads = list(s._threads)  # type: ignore[attr-defined]
    assert len(threads) >= 2 and any(t.is_alive() for t in threads)
    s.close()
    assert all(not t.is_alive() for t in threads)


def test_sparse_member_not_captured() -> None:
    import struct  # noqa: F401  (sparse handled by the tar test; here: pax GNU.sparse keys)

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo("GNUSparseFile.0/data.bin")
        ti.size = 4
        ti.pax_headers = {
            "GNU.sparse.major": "1",
            "GNU.sparse.minor": "0",
            "GNU.sparse.name": "data.bin",
            "GNU.sparse.realsize": "100",
        }
        tf.addfile(ti, io.BytesIO(b"abcd"))
    li = read(buf.getvalue())
    e = li.entries["/data.bin"]
    assert e.matched and e.content is None


def test_null_progress_default_ok() -> None:
    with Spool() as sp:
        li = read_layer(
            io.BytesIO(make_tar(BASIC)),
            index=3,
            name="l3",
            matcher=PathMatcher([]),
            spool=sp,
            limits=Limits(),
            progress=NullProgress(),
            size=123,
        )
    assert li.ref.index == 3 and li.ref.size == 123


def test_spool_makes_its_directory_when_first_needed() -> None:
    # a scan that spools nothing makes no temp directory; one that does removes it on close
    with Spool() as unused:
        pass
    assert unused._dir is None
    with Spool() as sp:
        assert sp._dir is None
        path = sp.new_path()
        d = sp.dir
        assert os.path.dirname(path) == d and os.path.isdir(d)
        assert os.stat(d).st_mode & 0o777 == 0o700  # mkdtemp: private
        with open(path, "wb") as f:
            f.write(b"x")
    assert not os.path.exists(d)
    with pytest.raises(ValueError):
        unused.new_path()  # closed: no directory made after the fact
