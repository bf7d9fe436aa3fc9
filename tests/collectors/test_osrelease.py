"""os-release parsing, on this machine's real file and on the syntax os-release(5) allows."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from gpusbom.collectors.osrelease import (
    attribute_layers,
    distro_qualifier,
    parse_os_release,
)

HOST = next((p for p in (Path("/etc/os-release"), Path("/usr/lib/os-release")) if p.is_file()), None)


@pytest.mark.skipif(HOST is None, reason="no os-release on this host")
def test_host_file_matches_shell() -> None:
    assert HOST is not None
    mine = parse_os_release(HOST.read_text())
    # the shell itself is the oracle: source the file and print each variable
    keys = sorted(mine)
    script = f". {shlex.quote(str(HOST))}; " + "; ".join(
        f'printf "%s\\0" "${k}"' for k in keys
    )
    out = subprocess.run(["sh", "-c", script], capture_output=True, check=True).stdout
    values = out.decode().split("\0")[:-1]
    assert dict(zip(keys, values)) == mine
    assert mine.get("ID")


def test_quoting() -> None:
    text = r"""
# comment
NAME="Ubuntu"
VERSION_ID="22.04"
ID=ubuntu
ID_LIKE=debian
PRETTY_NAME='Ubuntu 22.04.4 LTS'
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ESCAPED="a \"quoted\" \$word \\ done"
UNQUOTED=foo\ bar
export EXPORTED=yes
not a line
1BAD=x
EMPTY=
CPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"
TRAILING="x" # comment
"""
    d = parse_os_release(text)
    assert d["NAME"] == "Ubuntu"
    assert d["VERSION_ID"] == "22.04"
    assert d["ID"] == "ubuntu"
    assert d["PRETTY_NAME"] == "Ubuntu 22.04.4 LTS"
    assert d["VERSION"] == "22.04.4 LTS (Jammy Jellyfish)"
    assert d["ESCAPED"] == 'a "quoted" $word \\ done'
    assert d["UNQUOTED"] == "foo bar"
    assert d["EXPORTED"] == "yes"
    assert d["EMPTY"] == ""
    assert d["CPE_NAME"] == "cpe:/o:redhat:enterprise_linux:9::baseos"
    assert d["TRAILING"] == "x"
    assert "1BAD" not in d


def test_unbalanced_quotes_do_not_crash() -> None:
    assert parse_os_release('ID="debian\nVERSION_ID=12\n') == {"ID": "debian", "VERSION_ID": "12"}


def test_distro_qualifier() -> None:
    assert distro_qualifier({"ID": "debian", "VERSION_ID": "12"}) == "debian-12"
    assert distro_qualifier({"ID": "debian", "VERSION_CODENAME": "trixie"}) == "debian-trixie"
    assert distro_qualifier({"ID": "rhel", "VERSION_ID": "9.4"}) == "rhel-9.4"
    assert distro_qualifier({"ID": "Alpine"}) == "alpine"
    assert distro_qualifier({}) is None


def test_attribute_layers() -> None:
    snaps = [
        ("L0", {"a": "1", "b": "1"}),
        ("L1", {"a": "1", "b": "2"}),  # b upgraded
        ("L2", {"a": "1", "b": "2", "c": "1"}),  # c installed
        ("L3", {"a": "1", "c": "1"}),  # b removed
    ]
    assert attribute_layers(snaps, {"a": "1", "c": "1"}) == {"a": "L0", "c": "L2"}
    # a reinstall after a removal counts from the reinstall
    snaps2 = [("L0", {"a": "1"}), ("L1", {}), ("L2", {"a": "1"})]
    assert attribute_layers(snaps2, {"a": "1"}) == {"a": "L2"}
    # an unreadable version stops the walk
    snaps3 = [("L0", {"a": "1"}), ("L1", None), ("L2", {"a": "1"})]
    assert attribute_layers(snaps3, {"a": "1"}) == {"a": "L2"}
    assert attribute_layers([], {"a": "1"}) == {"a": None}


def test_os_component_identity() -> None:
    from gpusbom.collectors.osrelease import os_identity

    assert os_identity("debian", "12", None) == (
        "pkg:generic/debian@12", "cpe:2.3:o:debian:debian_linux:12:*:*:*:*:*:*:*")
    assert os_identity("ubuntu", "22.04", None)[1] == (
        "cpe:2.3:o:canonical:ubuntu_linux:22.04:*:*:*:*:*:*:*")
    assert os_identity("rocky", "9.4", None)[1] == "cpe:2.3:o:rocky:rocky_linux:9:*:*:*:*:*:*:*"
    # the distribution's own CPE_NAME wins
    assert os_identity("rhel", "9.4", "cpe:/o:redhat:enterprise_linux:9::baseos") == (
        "pkg:generic/rhel@9.4", "cpe:/o:redhat:enterprise_linux:9::baseos")
    assert os_identity("myos", None, None) == ("pkg:generic/myos", None)
