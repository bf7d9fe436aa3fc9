"""PathMatcher with "everything below a directory" specs (``/**/libexec/**``): found through
the directory, without making every other file a candidate."""

from __future__ import annotations

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
