"""Version schemes: exact cases and hypothesis properties (total order, range membership
agrees with the order)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpusbom.advisories.versions import (
    InvalidVersion,
    Range,
    build_of,
    compare,
    driver_branch,
    parse,
)


@pytest.mark.parametrize(
    "scheme, a, b, want",
    [
        ("deb", "1:1.0-1", "2.0-1", 1),  # epoch wins
        ("deb", "1.17.8-1", "1.17.8-1~deb12u1", 1),  # tilde sorts before everything
        ("deb", "2.0~rc1", "2.0", -1),
        ("deb", "1.0+deb12u1", "1.0", 1),
        ("deb", "0:1.0", "1.0", 0),
        ("rpm", "1.0~rc1", "1.0", -1),
        ("rpm", "1:1.0", "2.0", 1),
        ("rpm", "1.0^git1", "1.0", 1),
        ("rpm", "1.0^git1", "1.0.1", -1),
        ("rpm", "1.0a", "1.0", 1),
        ("rpm", "1.10", "1.9", 1),
        ("pep440", "2.6.0+cu124", "2.6.0", 1),
        ("pep440", "2.6.0a0+ecf3bae40a.nv25.01", "2.6.0", -1),
        ("pep440", "2.5.1", "2.6.0", -1),
        ("nvidia-driver", "580.126.09", "580.126.9", 0),
        ("nvidia-driver", "580.126.09", "580.95.05", 1),
        ("nvidia-driver", "535.288.01", "570.211.01", -1),
        ("intel", "32.0.101.6083", "32.0.101.5736", 1),
        ("intel", "2025.0.0", "2025.0", 0),
        ("intel", "2024.1", "2024.0.2", 1),
        ("semver", "v1.16.1", "1.16.2", -1),
        ("semver", "1.17.0-rc.1", "1.17.0", -1),
        ("semver", "25.07", "25.06", 1),
    ],
)
def test_compare(scheme: str, a: str, b: str, want: int) -> None:
    assert compare(scheme, a, b) == want
    assert compare(scheme, b, a) == -want


def test_invalid() -> None:
    for scheme, v in [("nvidia-driver", "580.x"), ("pep440", "1.17.8-1~x"), ("deb", "abc"),
                      ("intel", "v-1"), ("semver", "")]:
        with pytest.raises(InvalidVersion):
            parse(scheme, v)


def test_driver_branch() -> None:
    assert driver_branch("580.126.09") == "580"
    assert driver_branch("libcuda") is None


_num = st.integers(min_value=0, max_value=300)
_alnum = st.text("abcxyz", min_size=1, max_size=3)

_DEB = st.builds(
    lambda e, parts, tilde, rev: (f"{e}:" if e else "") + ".".join(map(str, parts))
    + (f"~{tilde}" if tilde else "") + (f"-{rev}" if rev else ""),
    st.integers(0, 2), st.lists(_num, min_size=1, max_size=4), st.one_of(st.none(), _alnum),
    st.one_of(st.none(), st.builds(str, _num), _alnum.map(lambda s: "1" + s)),
)
_RPM = st.builds(
    lambda e, parts, mark, rel: (f"{e}:" if e else "") + ".".join(parts) + (mark or "")
    + (f"-{rel}" if rel else ""),
    st.integers(0, 2), st.lists(st.one_of(st.builds(str, _num), _alnum), min_size=1, max_size=4),
    st.one_of(st.none(), st.sampled_from(["~rc1", "^git2", "~", "a"])),
    st.one_of(st.none(), st.builds(str, _num)),
)
_PEP = st.builds(
    lambda parts, pre, local: ".".join(map(str, parts)) + (pre or "") + (f"+{local}" if local else ""),
    st.lists(_num, min_size=1, max_size=4),
    st.one_of(st.none(), st.sampled_from(["a0", "b1", "rc2", ".post1", ".dev3"])),
    st.one_of(st.none(), st.sampled_from(["cu124", "cpu", "rocm6.2", "ecf3bae.nv25.01"])),
)
_DRIVER = st.builds(
    lambda b, m, p: f"{b}.{m}" + (f".{p:02d}" if p is not None else ""),
    st.integers(400, 700), _num, st.one_of(st.none(), st.integers(0, 99)),
)
_INTEL = st.lists(_num, min_size=1, max_size=4).map(lambda p: ".".join(map(str, p)))
_SEMVER = st.builds(
    lambda v, parts, pre: v + ".".join(map(str, parts)) + (f"-{pre}" if pre else ""),
    st.sampled_from(["", "v"]), st.lists(_num, min_size=1, max_size=4),
    st.one_of(st.none(), st.sampled_from(["rc.1", "rc.2", "alpha", "beta.3", "1"])),
)
SCHEMES = {
    "deb": _DEB, "rpm": _RPM, "pep440": _PEP, "nvidia-driver": _DRIVER, "intel": _INTEL,
    "semver": _SEMVER,
}


def _cmp(scheme: str, a: str, b: str) -> int:
    return compare(scheme, a, b)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_total_order(scheme: str, data: st.DataObject) -> None:
    strat = SCHEMES[scheme]
    a, b, c = data.draw(strat), data.draw(strat), data.draw(strat)
    ab, ba = _cmp(scheme, a, b), _cmp(scheme, b, a)
    assert ab == -ba  # antisymmetric; exactly one of <, =, > holds (totality)
    assert _cmp(scheme, a, a) == 0  # reflexive
    if ab <= 0 and _cmp(scheme, b, c) <= 0:
        assert _cmp(scheme, a, c) <= 0  # transitive
    if ab == 0 and _cmp(scheme, b, c) == 0:
        assert _cmp(scheme, a, c) == 0
    # sorting by key agrees with pairwise comparison
    xs = sorted([a, b, c], key=lambda v: _Key(scheme, v))
    assert _cmp(scheme, xs[0], xs[1]) <= 0 and _cmp(scheme, xs[1], xs[2]) <= 0


class _Key:
    def __init__(self, scheme: str, v: str) -> None:
        self.scheme, self.v = scheme, v

    def __lt__(self, other: _Key) -> bool:
        return compare(self.scheme, self.v, other.v) < 0


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_range_membership_consistent(scheme: str, data: st.DataObject) -> None:
    strat = SCHEMES[scheme]
    lo, hi, v = data.draw(strat), data.draw(strat), data.draw(strat)
    above = lo == "0" or _cmp(scheme, lo, v) <= 0  # introduced "0": from the beginning
    fixed = Range(scheme, introduced=lo, fixed=hi)
    assert fixed.contains(v) == (above and _cmp(scheme, v, hi) < 0)
    last = Range(scheme, introduced=lo, last_affected=hi)
    # an inclusive bound in release form holds that release's builds (10.16.1.11 <= 10.16.1)
    assert last.contains(v) == (above and (_cmp(scheme, v, hi) <= 0 or build_of(scheme, v, hi)))
    assert Range(scheme, fixed=hi).contains(v) == (_cmp(scheme, v, hi) < 0)
    # a fixed version is never inside a range it fixes
    assert not Range(scheme, fixed=hi).contains(hi)
    assert Range(scheme, last_affected=hi).contains(hi)
