"""``gpusbom._wire``: what a forked worker sends its parent is read back as data only."""

from __future__ import annotations

import hashlib
import os
import pickle

import msgpack
import pytest

from gpusbom import _wire
from gpusbom.collectors.base import GroupedPaths
from gpusbom.collectors.dpkg import DebPackage
from gpusbom.errors import UnsafeArchiveError


def _global_stream(module: str, name: str, arg: str) -> bytes:
    # pickle protocol 0: GLOBAL 'module name', then call it with one string argument
    return f"c{module}\n{name}\n(V{arg}\ntR.".encode()


def _ext(code: int, name: str, args: object) -> bytes:
    return msgpack.packb(msgpack.ExtType(code, msgpack.packb([name, args])))


@pytest.mark.parametrize(("module", "name"), [
    ("os", "system"),
    ("posix", "system"),
    ("builtins", "eval"),
    ("builtins", "getattr"),
    ("gpusbom.fsview.layercache", "os.system"),
    ("gpusbom.collectors.base", "GroupedPaths.of"),
    ("subprocess", "Popen"),
])
def test_a_stream_naming_code_is_refused_and_runs_nothing(tmp_path, module, name) -> None:
    marker = tmp_path / "ran"
    allowed = _wire.allow([GroupedPaths])
    # a pickle that runs the command under plain pickle (the test's stream is a real exploit)
    data = _global_stream(module, name, f"touch {marker}")
    with pytest.raises(_wire.WireError):
        _wire.loads(data, allowed)
    # the format's own ways to name something: an object, an enum member, an error
    for code in (4, 5, 6):
        with pytest.raises(_wire.WireError):
            _wire.loads(_ext(code, f"{module}:{name}", [f"touch {marker}"]), allowed)
    assert not marker.exists()
    if (module, name) == ("os", "system"):
        pickle.loads(data)  # noqa: S301 - the point of the test
        assert marker.exists()


def test_listed_classes_and_plain_values_round_trip() -> None:
    gp = GroupedPaths.of(["/usr/lib/a.so", "/usr/lib/b.so", "/etc/x"])
    pkg = DebPackage(name="libcudnn9", version="9.1.0.70-1", architecture="amd64")
    value = ("ok", {1: ([("p", "file", 3, 0o644, None, 0, b"x", True)], ["u"], {("k", "p"): gp})},
             7, {1.5, 2.5}, frozenset({"a"}), pkg)
    got = _wire.loads(_wire.dumps(value), _wire.allow([GroupedPaths, DebPackage]))
    assert list(got[1][1][2][("k", "p")]) == list(gp)
    assert got[0] == "ok" and got[2] == 7 and got[3] == {1.5, 2.5}
    assert got[5] == pkg
    # a class the caller did not list is refused
    with pytest.raises(_wire.WireError, match="GroupedPaths"):
        _wire.loads(_wire.dumps(gp), _wire.allow([]))


def test_errors_come_back_as_themselves_or_as_runtime_errors() -> None:
    err = _wire.loads(_wire.dumps(_wire.portable(UnsafeArchiveError("too many records"))), {})
    assert isinstance(err, UnsafeArchiveError) and "too many records" in str(err)
    assert isinstance(_wire.loads(_wire.dumps(_wire.portable(OSError(5, "EIO"))), {}), OSError)

    class Foreign(Exception):
        pass

    got = _wire.loads(_wire.dumps(_wire.portable(Foreign("x"))), {})
    assert type(got) is RuntimeError and "Foreign: x" in str(got)


@pytest.mark.parametrize("data", [b"", b"\x80\x05", hashlib.sha512(b"not a pickle").digest(), b"\x80\x05K\x01", b"(" * 5000],
                         ids=["empty", "header-only", "noise", "truncated", "deep-marks"])
def test_malformed_bytes_are_a_wire_error(data: bytes) -> None:
    with pytest.raises(_wire.WireError):
        _wire.loads(data, {})


def test_a_listed_class_is_built_without_running_its_methods() -> None:
    class_calls: list[str] = []
    real_init = GroupedPaths.__init__

    def spy(self: GroupedPaths, groups: list) -> None:  # type: ignore[type-arg]
        class_calls.append("init")
        real_init(self, groups)

    data = _wire.dumps(GroupedPaths([("/a", "x")]))
    GroupedPaths.__init__ = spy  # type: ignore[method-assign]
    try:
        got = _wire.loads(data, _wire.allow([GroupedPaths]))
    finally:
        GroupedPaths.__init__ = real_init  # type: ignore[method-assign]
    assert class_calls == [] and got.groups == [("/a", "x")]
    # a field count that does not fit the class is refused
    with pytest.raises(_wire.WireError, match="fields"):
        _wire.loads(_ext(4, "gpusbom.collectors.base:GroupedPaths", [1, 2]),
                    _wire.allow([GroupedPaths]))
