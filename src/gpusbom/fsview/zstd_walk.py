"""The zstd frame walker: frame and block headers over the raw bytes of a blob.

The zstd stream reader ends quietly when its input stops inside a frame; the sequential
decoder of ``fsview.decode`` feeds every raw chunk to this walker (block contents are
skipped, not parsed), which tells a complete stream (it ends at a frame boundary) from a
truncated one.
"""

from __future__ import annotations

from ..errors import LayerError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class ZstdFrameWalker:
    """Walks zstd frame and block headers over the raw bytes (block contents are skipped).

    The zstd stream reader ends quietly when its input stops inside a frame;
    this tells a complete stream (ends at a frame boundary) from a truncated one.
    """

    _MAGIC, _SKIPSIZE, _FHD, _BLOCK = range(4)

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = self._MAGIC
        self.need = 4
        self.hbuf = b""
        self.skip = 0
        self.frames = 0
        self.checksum = False

    def _bad(self, why: str) -> LayerError:
        return LayerError(f"{self.name}: corrupt zstd: {why}")

    def feed(self, data: bytes) -> None:
        pos = 0
        n = len(data)
        while pos < n:
            if self.skip:
                take = min(self.skip, n - pos)
                self.skip -= take
                pos += take
                continue
            want = self.need - len(self.hbuf)
            chunk = data[pos : pos + want]
            pos += len(chunk)
            if len(chunk) < want:
                self.hbuf += chunk
                return
            hdr = self.hbuf + chunk if self.hbuf else chunk
            self.hbuf = b""
            self._header(hdr)

    def _header(self, h: bytes) -> None:
        st = self.state
        if st == self._MAGIC:
            if h == ZSTD_MAGIC:
                self.state, self.need = self._FHD, 1
            elif h[1:] == b"\x2a\x4d\x18" and 0x50 <= h[0] <= 0x5F:
                self.state, self.need = self._SKIPSIZE, 4
            else:
                raise self._bad("unknown frame magic" if self.frames else "bad frame header")
        elif st == self._SKIPSIZE:
            self.skip = int.from_bytes(h, "little")
            self.state, self.need = self._MAGIC, 4
            self.frames += 1
        elif st == self._FHD:
            d = h[0]
            if d & 0x08:
                raise self._bad("reserved bit set in frame header")
            single = bool(d & 0x20)
            fcs = (1 if single else 0, 2, 4, 8)[d >> 6]
            self.skip = (0 if single else 1) + (0, 1, 2, 4)[d & 3] + fcs
            self.checksum = bool(d & 0x04)
            self.state, self.need = self._BLOCK, 3
        else:  # block header
            v = int.from_bytes(h, "little")
            btype = (v >> 1) & 3
            if btype == 3:
                raise self._bad("reserved block type")
            self.skip = 1 if btype == 1 else v >> 3
            if v & 1:  # last block of the frame
                self.skip += 4 if self.checksum else 0
                self.state, self.need = self._MAGIC, 4
                self.frames += 1

    def check_complete(self) -> None:
        if self.skip or self.hbuf or self.state != self._MAGIC or not self.frames:
            raise self._bad("truncated (unexpected end of compressed data)")
