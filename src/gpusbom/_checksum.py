"""The checksum an air-gapped import checks (``advisories import``, ``fingerprints import``):
the SHA-256 given with ``--sha256`` or in ``FILE.sha256`` beside the file, as
``sha256sum`` writes it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import InputError


def verify_sha256(path: str, data: bytes, sha256: str | None) -> None:
    """Raise ``InputError`` (nothing imported) unless ``data``, read from ``path``, has the
    SHA-256 ``sha256`` or, when that is None, the one ``path.sha256`` names."""
    want = sha256
    if want is None:
        try:
            want = Path(f"{path}.sha256").read_text(encoding="ascii").split()[0]
        except (OSError, IndexError, UnicodeDecodeError):
            raise InputError(f"{path}: no checksum: put {Path(path).name}.sha256 beside it "
                             "or pass --sha256") from None
    have = hashlib.sha256(data).hexdigest()
    if have != want.strip().lower():
        raise InputError(f"{path}: checksum mismatch (expected {want.strip()[:16]}..., "
                         f"file {have[:16]}...); nothing imported")
