"""The manifest parsers' ``names`` filter (a host scan's speed) keeps exactly the entries
whose base name is wanted: the same as parsing everything and filtering afterwards (as
``attach_declared_digests`` does)."""

from __future__ import annotations

import base64
import hashlib

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpusbom.collectors._digests import parse_md5sums_digests, parse_record_digests

_comp = st.sampled_from(["lib", "libcuda.so.1", "METADATA", "status", ".", "..", "", " ..",
                         "a b", "x,y", "é", "usr", "bin", "lib\r", "q\x85r", "site-packages",
                         "python3"])
_path = st.lists(_comp, min_size=1, max_size=4).map("/".join)


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


@settings(max_examples=400, deadline=None)
@given(st.lists(_path, max_size=12), st.sets(_comp, max_size=3), st.booleans())
def test_md5sums_filter(paths: list[str], names: set[str], star: bool) -> None:
    text = "\n".join(f"{hashlib.md5(p.encode()).hexdigest()} {'*' if star else ' '}{p}"  # noqa: S324 - test data
                     for p in paths)
    every = [(p, d) for p, d in parse_md5sums_digests(text) if _base(p) in names]
    assert list(parse_md5sums_digests(text, names)) == every


@settings(max_examples=400, deadline=None)
@given(st.lists(_path, max_size=12), st.sets(_comp, max_size=3),
       st.sampled_from(["\n", "\r\n", "\r"]))
@example([".."], {"python3"}, "\n")  # a row naming base's parent: its line lacks the name
@example(["lib/."], {"lib"}, "\n")
@example(["a/", "b"], {"site-packages"}, "\r\n")
def test_record_filter(paths: list[str], names: set[str], eol: str) -> None:
    def row(p: str) -> str:
        b64 = base64.urlsafe_b64encode(hashlib.sha256(p.encode()).digest()).decode().rstrip("=")
        return f'"{p}",sha256={b64},1' if "," in p else f"{p},sha256={b64},1"
    text = eol.join(row(p) for p in paths) + eol + "pkg.dist-info/RECORD,,"
    base = "/usr/lib/python3/site-packages"
    every = [(p, d) for p, d in parse_record_digests(text, base) if _base(p) in names]
    got = list(parse_record_digests(text, base, names))
    # rows whose own base name is "", "." or ".." come too (they are decided after
    # normalising); attach_declared_digests tests every base name again
    assert [(p, d) for p, d in got if _base(p) in names] == every
    assert set(got) <= set(parse_record_digests(text, base))
