"""NVIDIA's free-text version phrases (CSAF ``product_version`` names) -> ranges.

- ``All driver versions prior to 580.159.03``  -> ``< 580.159.03``
- ``All versions up to and including v1.16.1`` -> ``<= 1.16.1``
- ``v0 - v10.16.1``, ``0.0-26.05`` -> ``0 .. 10.16.1`` / ``0.0 .. 26.05`` (inclusive)
- ``0.0 to v1.3.0 rc14`` -> ``0.0 .. 1.3.0rc14`` (a release candidate, as PEP 440 writes it)
- ``580.126.09(All versions prior to and including vGPU 19.4)`` -> ``<= 580.126.09``
- ``580.126.09(vGPU software 19.4)``, ``v1.16.2``, ``24.09`` -> that version

``parse_phrase`` returns None for a phrase it does not understand in full: the importer
then makes the entry ``review`` (``no_range``), never a literal version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Phrase", "parse_phrase", "phrase_class"]

# one alphanumeric per repetition and possessive quantifiers: the same versions as
# "\d+(?:[.\-_+]?[0-9A-Za-z]+)*" without its exponential backtracking on long near-misses
_V = r"[vVrR]?(\d++(?:[.\-_+]?[0-9A-Za-z])*+)"
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
)
# an optional product word or two before a version ("CUDA Toolkit 12.8", "IGX 1.1")
_PFX = r"(?:[A-Z][\w-]*\s+){0,3}"


@dataclass(frozen=True)
class Phrase:
    """A parsed version phrase: a range (``fixed`` = prior to, ``last_affected`` = up to
    and including, ``introduced`` = from) or one ``version``."""

    text: str
    version: str | None = None
    fixed: str | None = None
    last_affected: str | None = None
    introduced: str | None = None
    qualifier: str | None = None  # text in parentheses after a version, e.g. "vGPU 19.4"


_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # "All driver versions prior to 580.159.03", "All versions prior to CUDA Toolkit 12.2"
    (re.compile(rf"^(?:all\s+)?(?:[\w.+-]+\s+){{0,3}}versions?\s+(?:before|prior\s+to|earlier\s+than|below)\s+{_PFX}{_V}$", re.I), "fixed"),  # noqa: E501 - a pattern reads best unbroken
    # "All versions up to and including v1.16.1", "All versions up to CUDA Toolkit 12.8"
    (re.compile(rf"^(?:all\s+)?(?:[\w.+-]+\s+){{0,3}}versions?\s+(?:up\s+to\s+and\s+including|up\s+to|prior\s+to\s+and\s+including|through)\s+{_PFX}{_V}$", re.I), "last_affected"),  # noqa: E501 - a pattern reads best unbroken
    # "35.6.2 and earlier", "1.8.7 and prior versions", "32.7.2 and prior releases"
    (re.compile(rf"^{_PFX}{_V}\s+(?:and|or)\s+(?:earlier|prior(?:\s+(?:versions?|releases?))?|older)$", re.I), "last_affected"),  # noqa: E501 - a pattern reads best unbroken
    # "46.3008 or newer", "1.6.0 and later"
    (re.compile(rf"^{_PFX}{_V}\s+(?:and|or)\s+(?:newer|later)$", re.I), "introduced"),
    # "All versions from 22.09 to 24.03" / "22.09 through 24.03"
    (re.compile(rf"^(?:all\s+)?(?:versions?\s+)?(?:from\s+)?{_V}\s+(?:to|through)\s+{_V}$", re.I), "between"),
    # "0 - 4.4", "v0 - v10.16.1", "V- V": from .. up to and including (the spaceless
    # "0.0-26.05" is read by ``_hyphen_range``: "5.8-7.0.6.1" is one version)
    (re.compile(r"^[vV]?(\d+(?:\.\d+)*)(?:\s+-|-\s+)\s*[vV]?(\d+(?:\.\d+)*)$"), "between"),
    # "v1.16.2", "580.126.09", "CUDA Toolkit 12.4.1", "r24.09"
    (re.compile(rf"^(?:version\s+)?{_PFX}{_V}$"), "version"),
]
_QUALIFIED = re.compile(r"^(?P<head>[^()]*?)\s*\((?P<qual>[^()]*)\)\s*$")
_QUAL_RANGE = re.compile(
    r"^all\s+(?:versions?\s+)?(?:prior\s+to\s+and\s+including|up\s+to\s+and\s+including)\b", re.I
)
_SUFFIX = re.compile(
    r"^(?P<head>.*?\d)\.?\s+(?P<qual>for support of .*|LTS|Only .*)$", re.I
)
_UPDATE = re.compile(r"(?<![\d.])(\d+\.\d+)(?:U|\s+Update\s+)(\d+)\b")


_HYPHEN = re.compile(r"^[vV]?(\d+(?:\.\d+)+)-[vV]?(\d+(?:\.\d+)+)$")
# "v1.3.0 rc14", "1.3.0-rc.14", "1.3.0~rc14": one release candidate, written as PEP 440 does
_PRE = re.compile(r"(?<=\d)(?:\s+|[-~.])?(rc|alpha|beta|pre)\.?(\d+)\b", re.I)


def _hyphen_range(s: str) -> Phrase | None:
    """``0.0-26.05`` (no spaces): a range when both sides are dotted versions of as many
    parts, the first not above the second; anything else written so (``5.8-7.0.6.1``,
    ``9.0-22``) is no range."""
    m = _HYPHEN.match(s)
    if not m:
        return None
    lo, hi = m.group(1), m.group(2)
    a, b = [int(x) for x in lo.split(".")], [int(x) for x in hi.split(".")]
    if len(a) != len(b) or a > b:
        return None
    return Phrase(s, introduced=lo, last_affected=hi)


def _plain(s: str) -> Phrase | None:
    got = _hyphen_range(s)
    if got is not None:
        return got
    for rx, kind in _PATTERNS:
        m = rx.match(s)
        if not m:
            continue
        if kind == "fixed":
            return Phrase(s, fixed=m.group(1))
        if kind == "last_affected":
            return Phrase(s, last_affected=m.group(1))
        if kind == "introduced":
            return Phrase(s, introduced=m.group(1))
        if kind == "between":
            return Phrase(s, introduced=m.group(1), last_affected=m.group(2))
        return Phrase(s, version=m.group(1))
    return None


def parse_phrase(text: str) -> Phrase | None:
    """One NVIDIA version phrase -> ``Phrase``; None when not understood."""
    s = " ".join(text.replace("\u00a0", " ").split()).rstrip(".")
    s = _UPDATE.sub(r"\1.\2", s)  # CUDA "12.4 Update 1" / "12.4U1" is release 12.4.1
    s = _PRE.sub(lambda m: m.group(1).lower() + m.group(2), s)
    qual = None
    m = _QUALIFIED.match(s) or _SUFFIX.match(s)
    if m and m.group("head"):
        s, qual = m.group("head").strip(), m.group("qual").strip()
    ph = _plain(s)
    if ph is None:
        return None
    if qual and ph.version and _QUAL_RANGE.match(qual):
        # "580.105.08(All versions prior to and including vGPU software 19.3)": the version
        # is the last one of the named release line, so it is the last affected
        return Phrase(text, last_affected=ph.version, qualifier=qual)
    return Phrase(
        text, version=ph.version, fixed=ph.fixed, last_affected=ph.last_affected,
        introduced=ph.introduced, qualifier=qual,
    )


def phrase_class(text: str) -> str:
    """A phrase with its versions, months and numbers abstracted: what a report groups by."""
    s = " ".join(text.split())
    s = re.sub(rf"\b(?:{_MONTHS})\s+\d{{4}}\b", "MONTH YEAR", s)
    s = re.sub(r"v?\d+(?:\.\d+)+(?:[-.][0-9A-Za-z]+)*", "V", s)
    s = re.sub(r"\b\d+\b", "N", s)
    return s
