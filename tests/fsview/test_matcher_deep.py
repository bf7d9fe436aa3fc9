"""PathMatcher with "everything below a directory" specs (``/**/libexec/**``): found through
the directory, without making every other file a candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusbom.fsview.spec import PathMatcher, PathSpec


def _m() -> PathMatcher:
    return PathMatcher(
        [PathSpec("/**/libexec/**"), PathSpec("/**/bin/*"), PathSpec("/**/*.dist-info/METADATA")]
    )


def test_deep_spec_matches_below_its_directory_only() -> None:
    m = _m()
    for p in ("/usr/libexec/x", "/usr/libexec/a/b/c", "/opt/t/libexec/y.py"):
        assert m.match(p) is not None, p
    for p in ("/libexecx/y", "/usr/lib/libexec", "/usr/lib/foo.py", "/usr/share/x.json"):
        assert m.match(p) is None, p
    assert m.match("/usr/bin/tool") is not None
    assert m.match("/site/x-1.dist-info/METADATA") is not None


def test_other_directories_keep_their_base_name_prefilter() -> None:
    m = _m()
    pre = m.dir_prefilter("/usr/lib/python3/site-packages/pkg")
    assert pre is not None  # one C-level test per name, no Python per file
    assert pre("module.py") is None
    assert pre("METADATA") is not None
    assert m.dir_prefilter("/usr/libexec") is None  # anything may match there
    assert m.dir_prefilter("/usr/libexec/sub") is None


def test_everything_spec() -> None:
    m = PathMatcher([PathSpec("/**")])
    for p in ("/x", "/a/b/c", "/etc/os-release"):
        assert m.match(p) is not None, p
    assert m.dir_prefilter("/") is None
    assert m.dir_prefilter("/usr/lib") is None


def test_collectors_matcher_layout_kept_in_the_user_cache(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # the collectors' matcher is laid out once per set of specs and code, then read from the
    # user cache: the same answers for paths around every spec as one laid out afresh
    import random

    from gpusbom import _codeid
    from gpusbom.collect import build_matcher, select_collectors
    from gpusbom.fsview import spec

    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path))
    classes = select_collectors(None)
    calls: list[int] = []
    layout = spec._layout
    monkeypatch.setattr(spec, "_layout", lambda p: calls.append(1) or layout(p))
    first = build_matcher(classes)
    assert len(first.specs) >= spec._CACHED_LAYOUT and calls == [1]
    cached = build_matcher(classes)
    assert calls == [1]  # from the cache
    monkeypatch.setattr(_codeid, "code_fingerprint", lambda: "another code")
    build_matcher(classes)
    assert calls == [1, 1]  # other code: laid out again
    rng = random.Random(7)
    paths = {"/", "/x", "/usr/libexec/a/b", "/etc/os-release"}
    for sp in first.specs:
        for _ in range(3):
            p = "".join(rng.choice(["/usr", "/lib", "/a.b", "-1", "x", "12"]) if c in "*?[]" else c
                        for c in sp.pattern.replace("**", "*"))
            paths.update({p, p + "x", p.rsplit("/", 1)[0] + "/y"})
    assert len(paths) > 1000
    for p in sorted(paths):
        a, b = first.match(p), cached.match(p)
        assert (a is None) == (b is None) and (a is None or (a.pattern, a.max_size, a.history)
                                               == (b.pattern, b.max_size, b.history)), p
        head = p.rsplit("/", 1)[0] or "/"
        pa, pb = first.dir_prefilter(head), cached.dir_prefilter(head)
        assert (pa is None) == (pb is None), head
    assert sum(first.match(p) is not None for p in paths) > 300


def test_component_test_answers_as_the_regex() -> None:
    # the test PathMatcher runs instead of compiling a spec's regex: the same answer as the
    # regex for every collector pattern of its shape, and for random ones, over paths built
    # around them (empty components, trailing slashes, pieces repeated); None elsewhere
    import random
    import re

    from gpusbom.collect import select_collectors
    from gpusbom.fsview.spec import component_test, glob_to_regex

    rng = random.Random(11)
    patterns = sorted({sp.pattern for c in select_collectors(None) for sp in c.paths})
    letters = ["a", "b", "ab", ".", "-", "x1", ""]
    for _ in range(300):
        comps = ["".join(rng.choice(letters + ["*"]) for _ in range(rng.randint(0, 4)))
                 for _ in range(rng.randint(1, 4))]
        patterns.append(("/**/" if rng.random() < 0.5 else "/") + "/".join(comps))
    shaped = 0
    for pattern in patterns:
        test = component_test(pattern)
        if "?" in pattern or "[" in pattern or "**" in pattern.removeprefix("/**/"):
            assert test is None, pattern
            continue
        assert test is not None, pattern
        shaped += 1
        rx = re.compile("^" + glob_to_regex(pattern) + "$")
        base = pattern.removeprefix("/**/").removeprefix("/")
        paths = {"/", "//", "x", "/x", base, "/" + base, "//" + base, "/a/" + base, "/a//" + base,
                 "/" + base + "/", "/" + base + "x", "/a/b/" + base.replace("*", ""),
                 "/" + base.replace("*", "ab"), "/q/" + base.replace("*", "a/b")}
        for _ in range(20):
            paths.add("/" + "/".join(rng.choice(["", "a", "ab", "b.x", base.replace("*", s)])
                                     for s in ("", "ab.", "-1")
                                     for _ in range(rng.randint(0, 1))))
        for p in paths:
            assert test(p) == (rx.match(p) is not None), (pattern, p)
    assert shaped > 250


def test_matcher_answers_as_with_regexes_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # "$" also matches before a final newline and "." (in "/**/") never matches one: a path
    # with a newline goes to the spec's regex; every answer is the one of regexes alone
    from gpusbom.fsview import spec

    specs = [PathSpec("/etc/os-release"), PathSpec("/**/x*/METADATA"), PathSpec("/**/*.so.*"),
             PathSpec("/opt/*/lib/lib?.so"), PathSpec("/**/libexec/**")]
    paths = ["/etc/os-release", "/etc/os-release\n", "/a\nb/x1/METADATA", "/a/x\n1/METADATA",
             "/a/x1/METADATA", "/a/y1/METADATA", "/x/METADATA\n", "/l/a.so.1", "/l/a.so.1\n",
             "/l\n/a.so.1", "/opt/r/lib/liba.so", "/opt/r\n/lib/liba.so", "/u/libexec/a\nb"]
    fast = spec.PathMatcher(specs)
    got = [(p, fast.match(p)) for p in paths]
    monkeypatch.setattr(spec, "component_test", lambda pattern: None)
    slow = spec.PathMatcher(specs)
    assert got == [(p, slow.match(p)) for p in paths]
    assert sum(m is not None for _, m in got) >= 5


def test_wild_base_under_a_wildcard_directory_is_found_through_the_directory() -> None:
    """``/**/*.dist-info/sboms/*`` (a wholly wild base name below a directory with a
    wildcard) once sent every path through the Python-level candidate search; the matcher
    now tests the directory with one regex: same answers as each spec's own regex."""
    import itertools
    import re

    from gpusbom.collect import build_matcher, select_collectors
    from gpusbom.fsview.spec import glob_to_regex

    m = PathMatcher([PathSpec("/**/*.dist-info/sboms/*"), PathSpec("/**/bin/*"),
                     PathSpec("/var/lib/dpkg/status.d/*"), PathSpec("/**/*.so")])
    assert m.match("/usr/lib/python3/site-packages/x-1.dist-info/sboms/a.cdx.json") is not None
    assert m.match("/x-1.dist-info/sboms/a") is not None
    assert m.match("/usr/lib/python3/site-packages/x-1.dist-info/sboms") is None
    assert m.match("/usr/lib/python3/site-packages/x-1.dist-info/sbomsx/a") is None
    assert m.match("/usr/lib/python3/site-packages/torch/lib/data.bin") is None
    assert m.match("/var/lib/dpkg/status.d/libc6") is not None
    # a directory where no wild-base spec can match keeps its base-name prefilter
    pre = m.dir_prefilter("/usr/lib/python3/site-packages/torch")
    assert pre is not None and pre("x.py") is None and pre("x.so") is not None
    assert m.dir_prefilter("/site/x-1.dist-info/sboms") is None
    # the collectors' matcher against each spec's own regex, over paths of many shapes
    full = build_matcher(select_collectors(None))
    rxs = [re.compile("^" + glob_to_regex(sp.pattern) + "$") for sp in full.specs]
    dirs = ["", "/usr/bin", "/opt/x/sbin", "/site/a-1.dist-info", "/site/a-1.dist-info/sboms",
            "/usr/lib/x86_64-linux-gnu", "/usr/libexec/a", "/var/lib/dpkg/status.d",
            "/t/triton/backends/nvidia/bin", "/site/torch/lib"]
    bases = ["METADATA", "libcudart.so.12", "x.so", "a.json", "tool", "x.py", "cuda.h", "b.onnx"]
    for d, b in itertools.product(dirs, bases):
        path = f"{d}/{b}"
        assert (full.match(path) is not None) == any(rx.match(path) for rx in rxs), path
