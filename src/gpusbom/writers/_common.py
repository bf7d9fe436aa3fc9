"""Helpers shared by the SBOM writers (not a format: the registry skips ``_`` modules)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import uuid
from collections.abc import Callable
from datetime import datetime

from packageurl import PackageURL

from ..identity import target_identity
from ..model import PROPERTY_NAMESPACE, Component, ScanResult, Unknown

#: namespace for every UUID / document namespace gpusbom derives
GPUSBOM_UUID_NS = uuid.uuid5(uuid.NAMESPACE_URL, "https://gpusbom.dev/")

_EMAIL_RE = re.compile(r"^\s*(?P<name>.*?)\s*<(?P<email>[^<>@\s]+@[^<>@\s]+\.[^<>@\s]+)>\s*$")


# CPE 2.2 URI binding and CPE 2.3 formatted-string binding (NISTIR 7695), as the
# CycloneDX XML schema checks them: the XML output must not carry a CPE it rejects.
_CPE22_RE = re.compile(r"[cC][pP][eE]:/[AHOaho]?(:[A-Za-z0-9._\-~%]*){0,6}")
_CPE23_VALUE = r"(?:\?*|\*?)(?:[A-Za-z0-9\-._]|\\[\\*?!\"#$%&'()+,/:;<=>@\[\]^`{|}~])+(?:\?*|\*?)"
_CPE23_FIELD = rf"(?:{_CPE23_VALUE}|[*\-])"
_CPE23_LANG = r"(?:[A-Za-z]{2,3}(?:-(?:[A-Za-z]{2}|[0-9]{3}))?|[*\-])"
_CPE23_RE = re.compile(
    rf"cpe:2\.3:[aho*\-](?::{_CPE23_FIELD}){{5}}:{_CPE23_LANG}(?::{_CPE23_FIELD}){{4}}"
)


def cpe_kind(cpe: str) -> str | None:
    """``"cpe23"`` / ``"cpe22"`` for a well-formed CPE, None otherwise."""
    if _CPE23_RE.fullmatch(cpe):
        return "cpe23"
    if _CPE22_RE.fullmatch(cpe):
        return "cpe22"
    return None


def one_line(value: str) -> str:
    """Names and versions are single-line fields in every format."""
    return " ".join(value.splitlines()) if ("\n" in value or "\r" in value) else value


def prop(key: str) -> str:
    """``collector`` -> ``gpusbom:collector``."""
    return f"{PROPERTY_NAMESPACE}:{key}"


def target_key(result: ScanResult) -> str:
    """What the document ids are derived from: the target's root bom-ref (identity.py)."""
    return target_identity(result.target).root_ref


#: ``content_digest`` of one result, sent by another process (``receive_digest``)
_given: tuple[ScanResult, Callable[[], str | None]] | None = None


def receive_digest(result: ScanResult, fd: int) -> None:
    """``content_digest(result)`` will read its value from ``fd`` (written there by
    ``send_digest`` in the process that forked this one, while this one renders), or
    compute it when nothing came."""
    global _given
    got: list[str | None] = []

    def read() -> str | None:
        if not got:
            data = b""
            try:
                while len(data) < 64 and (chunk := os.read(fd, 64 - len(data))):
                    data += chunk
                os.close(fd)
            except OSError:
                data = b""
            text = data.decode("ascii", "replace")
            got.append(text if len(text) == 64 else None)
        return got[0]

    _given = (result, read)


def send_digest(result: ScanResult, fds: list[int]) -> None:
    """Compute ``content_digest(result)`` once, write it to each of ``fds`` and close them.
    Where it fails, nothing is sent: each receiver computes it, and fails as it would have
    (the writer's own error)."""
    if not fds:
        return
    try:
        digest = content_digest(result).encode("ascii")
        for fd in fds:
            with contextlib.suppress(OSError):  # a child that is gone
                os.write(fd, digest)
    except Exception:  # noqa: BLE001, S110 - see above: the writer reports it
        pass
    finally:
        for fd in fds:
            os.close(fd)


def content_digest(result: ScanResult) -> str:
    """sha256 of the canonical native JSON: identical scans give identical ids."""
    if _given is not None and _given[0] is result:
        sent = _given[1]()
        if sent is not None:
            return sent
    d = result.to_document()
    # independent of the order the scanner happened to list things in (the bom-refs
    # decide alone where they are unique)
    refs = [c["bom_ref"] for c in d["components"]]
    d["components"] = sorted(d["components"], key=(
        (lambda c: c["bom_ref"]) if len(set(refs)) == len(refs)
        else (lambda c: (c["bom_ref"], json.dumps(c, sort_keys=True)))))
    d["relationships"] = sorted(d["relationships"], key=lambda r: (r["source"], r["type"], r["target"]))
    d["unknowns"] = sorted(d["unknowns"], key=lambda u: json.dumps(u, sort_keys=True))
    canon = json.dumps(d, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def document_uuid(result: ScanResult, purpose: str) -> uuid.UUID:
    """A deterministic UUID for one document of one scan.

    Derived from the target's root bom-ref and the whole content of the scan, its
    timestamp included: every distinct document gets its own id (a new timestamp is a
    new document), and only a byte-identical scan (``SOURCE_DATE_EPOCH`` set) repeats one.
    """
    return uuid.uuid5(GPUSBOM_UUID_NS, f"{purpose}|{target_key(result)}|{content_digest(result)}")


def parse_timestamp(ts: str | None) -> datetime:
    """ISO 8601 -> aware UTC datetime without microseconds. A result without a timestamp
    is stamped with ``clock.scan_timestamp()`` (``SOURCE_DATE_EPOCH`` when set); one that
    does not parse is an error, never silently the wall clock."""
    from ..clock import parse_iso, scan_timestamp
    from ..errors import WriterError

    dt = parse_iso(ts if ts else scan_timestamp())
    if dt is None:
        raise WriterError(f"the scan's timestamp {ts!r} is not ISO 8601")
    return dt.replace(microsecond=0)


def split_name_email(value: str) -> tuple[str, str | None]:
    """``"Debian Developers <d@l.org>"`` -> ``("Debian Developers", "d@l.org")``."""
    m = _EMAIL_RE.match(value)
    if m and m.group("name"):
        return m.group("name"), m.group("email")
    return value.strip(), None


def target_display_name(result: ScanResult) -> str:
    """The target's name (identity.py: an image's last repository segment, a host name)."""
    return target_identity(result.target).name


def target_version(result: ScanResult) -> str | None:
    """The target's version (an image's manifest digest, else its image ID)."""
    return target_identity(result.target).version


def sorted_unknowns(result: ScanResult) -> list[Unknown]:
    return sorted(result.unknowns, key=lambda u: (u.collector, u.path or "", u.reason))


def unknown_text(collector: str, reason: str, path: str | None) -> str:
    return f"{collector}: {reason}" + (f" ({path})" if path else "")


def target_purl(result: ScanResult) -> PackageURL | None:
    """``pkg:oci/NAME@DIGEST?...`` for an image (purl-spec oci type, identity.py)."""
    purl = target_identity(result.target).purl
    return PackageURL.from_string(purl) if purl else None


def target_identity_pairs(result: ScanResult) -> list[tuple[str, str]]:
    """``gpusbom:`` property pairs saying where the target's identity came from."""
    return [(prop(k), v) for k, v in target_identity(result.target).properties]


def stack_properties(result: ScanResult) -> list[tuple[str, str]]:
    """``gpusbom:stack:*`` name/value pairs for SBOM metadata (the GPU stack summary)."""
    out: list[tuple[str, str]] = []
    if result.stacks:
        out.append((prop("stack:summary"), result.stack_text()))
    for st in result.stacks:
        out.append((prop(f"stack:{st.stack}"), st.text()))
        if st.release:
            out.append((prop(f"stack:{st.stack}:release"), st.release))
        for part in st.parts:
            out.append(
                (prop(f"stack:{st.stack}:{part.product}"), " + ".join(part.versions) or "unknown")
            )
        for i, note in enumerate(st.notes, 1):
            out.append((prop(f"stack:{st.stack}:note:{i}"), note))
    return out


def finding_text(f: object) -> str:
    """One line for a finding: ``[severity] id: title (refs)``."""
    refs = ", ".join(getattr(f, "components", ()) or ())
    return (f"[{getattr(f, 'severity', '')}] {getattr(f, 'id', '')}: {getattr(f, 'title', '')}"
            + (f" ({refs})" if refs else ""))


def advisory_db_pairs(result: object) -> list[tuple[str, str]]:
    """``gpusbom:advisory-db:*`` (source, built, age-days, advisories) of the advisory
    database the scan matched against; empty when none was used."""
    info = getattr(result, "advisory_db", None) or {}
    out = []
    for key, name in (("source", "source"), ("built", "built"), ("age_days", "age-days"),
                      ("advisories", "advisories")):
        if info.get(key) is not None:
            out.append((prop(f"advisory-db:{name}"), str(info[key])))
    return out


def advisory_db_text(result: object) -> str | None:
    """One line: ``advisory database: bundled, built 2026-05-21, 7 days old, 28 advisories``."""
    info = getattr(result, "advisory_db", None)
    if not info:
        return None
    age = info.get("age_days")
    parts = [str(info.get("source") or "?"), f"built {info.get('built') or 'unknown'}",
             f"{age} day{'s' if age != 1 else ''} old" if age is not None else "age unknown"]
    if info.get("advisories") is not None:
        parts.append(f"{info['advisories']} advisories")
    return "advisory database: " + ", ".join(parts)


def own_file_sha256(c: Component) -> tuple[str, str] | None:
    """(path, sha256) when ``c`` *is* one hashed file: no package ecosystem (a library,
    executable or GPU code file found as a file) and every path of its evidence is that one
    file. Its SHA-256 then identifies the component (CycloneDX ``hashes``, SPDX package
    ``checksums`` with the path as ``packageFileName``). A package (deb, wheel, ...) or a
    product seen in several files gets no component hash: a file's digest is not the
    package's; it stays on that file's evidence (occurrence context, ``gpusbom:sha256``)."""
    if c.ecosystem not in (None, "generic"):
        return None
    paths = {ev.path for ev in c.evidence if ev.path}
    hashed = {(ev.path, ev.sha256) for ev in c.evidence if ev.path and ev.sha256}
    if len(paths) != 1 or len(hashed) != 1:
        return None
    return next(iter(hashed))
