"""rapidgzip inflating a whole-file gzip blob in a child process, read from a pipe.

``fsview.decode`` runs it for a large gzip blob that is a file of its own when inflate
threads are granted (see ``fsview.decompress``); ``sources.schedule`` counts its memory by
``parallel_chunk_kib``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

from .. import settings

if TYPE_CHECKING:
    from .blobspan import BlobSpan


def parallel_gzip_available() -> bool:
    try:
        import rapidgzip  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:  # pragma: no cover - a dependency on Linux x86-64 / arm64
        return False
    return True


# the child that runs rapidgzip's own command line: its Python binding holds the interpreter
# lock while it waits for its decoder threads, which in this process would stall the tar
# parser and the blob hash beside it (measured on 16 cores: the two largest layers of a
# 13 GB image took 5.1-5.8 s in a scan against 3.3 s alone)
_INFLATER_CODE = "import sys, rapidgzip; sys.argv[0] = 'rapidgzip'; sys.exit(rapidgzip.cli())"
_PIPE_READ = 4 << 20
#: rapidgzip's chunk (KiB of compressed input per decoder task; 4 MiB is its default). Its
#: memory grows with chunk x threads (decoded chunks wait in its prefetch cache): its
#: command line alone on a 1.35 GB layer of GPU
#: libraries (development VM, peak RSS, -P 2 / 4 / 8) took 174 / 283 / 459 MB with 4 MiB
#: chunks and 130 / 195 / 333 MB with 2 MiB, but 2 MiB cost 15% more CPU, and on a 16-core
#: H200 host the two large layers of a 13 GB image ended 7.5-7.8 s after the start instead
#: of 6.2-7.0 s (the scan 8.9 s instead of 7.6-8.1 s) with the same workers and threads.
#: ``sources.schedule`` gives a layer 2 MiB chunks (``Limits.inflate_chunk_kib``) where
#: the memory they save keeps a worker; ``GPUSBOM_RAPIDGZIP_CHUNK_KIB`` overrides both.
PARALLEL_CHUNK_KIB = 4096
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux); Python 3.10 names it, older ones do not
_F_GETPIPE_SZ = 1032


def parallel_chunk_kib() -> int:
    """The chunk size given to rapidgzip (``sources.schedule`` counts its memory by it)."""
    env = settings.raw("rapidgzip_chunk_kib")
    return int(env) if env.isdigit() and 64 <= int(env) <= 65536 else PARALLEL_CHUNK_KIB


class Inflater:
    """rapidgzip inflating a whole-file blob in a child process, its output read from a pipe.

    The child gets the blob's descriptor and nothing else (no shell, no image content on
    its command line); it is killed when the reader stops early."""

    def __init__(self, span: BlobSpan, threads: int, chunk_kib: int) -> None:
        import subprocess
        import tempfile

        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        try:
            self._proc = subprocess.Popen(  # noqa: S603 - our interpreter, fixed arguments
                [
                    sys.executable,
                    "-c",
                    _INFLATER_CODE,
                    "-d",
                    "-c",
                    "-q",
                    "-P",
                    str(max(1, threads)),
                    "--chunk-size",
                    str(chunk_kib),
                    f"/dev/fd/{span.fd}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._err,
                pass_fds=(span.fd,),
            )
        except BaseException:
            self._err.close()
            raise
        assert self._proc.stdout is not None  # noqa: S101 - stdout=PIPE
        self._out = self._proc.stdout
        self._fd = self._out.fileno()
        # a bigger pipe: fewer, larger reads (4 MiB where allowed, else the usual 1 MiB cap)
        #: the pipe's capacity (0: unknown): a read that returns it all found the pipe full,
        #: the child waiting for this reader (``GPUSBOM_DEBUG_INFLATE`` counts those reads)
        self.pipe_size = 0
        with contextlib.suppress(ImportError):
            import fcntl

            for size in (_PIPE_READ, 1 << 20):
                try:
                    fcntl.fcntl(self._fd, _F_SETPIPE_SZ, size)
                    break
                except OSError:
                    continue
            with contextlib.suppress(OSError):
                self.pipe_size = int(fcntl.fcntl(self._fd, _F_GETPIPE_SZ))
        self._closed = False

    def read(self) -> bytes:
        return os.read(self._fd, _PIPE_READ)

    def finish(self) -> str | None:
        """After the end of the output: None when the child succeeded, else why not."""
        rc = self._proc.wait()
        if rc == 0:
            return None
        self._err.seek(0)
        msg = self._err.read(400).decode("utf-8", "replace").strip().splitlines()
        return f"rapidgzip exit {rc}" + (f": {msg[-1]}" if msg else "")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            self._proc.kill()
        self._out.close()
        self._proc.wait()
        self._err.close()
