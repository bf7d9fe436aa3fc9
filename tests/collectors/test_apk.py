"""apk parser tests.

No Alpine package registry is reachable from the test environment, so the
database below is HAND-WRITTEN in the documented apk v2 installed-database
format (apk-tools doc "apk-v2": one stanza per package, blank-line separated,
``<letter>:<value>`` lines; file records F/R/a/Z follow the package fields).
The field values imitate an Alpine 3.19 base image.
"""

from __future__ import annotations

from gpusbom.collectors.apk import ApkPackage, apk_purl, parse_apk_installed, resolve_depends

INSTALLED = """\
C:Q1z8Y3lsL0ATLdxrE4kFWpqWj8uTA=
P:musl
V:1.2.4_git20230717-r4
A:x86_64
S:407278
I:667648
T:the musl c library (libc) implementation
U:https://musl.libc.org/
L:MIT
o:musl
m:Timo Teräs <timo.teras@iki.fi>
t:1700494428
c:c7d1df4d0cf4bf1ac0a3b6f1b9d4ac13a8a0d66a
p:so:libc.musl-x86_64.so.1=1
F:lib
R:ld-musl-x86_64.so.1
a:0:0:755
Z:Q1n2z3MG/H6Dq6X/qkjeDYi5OLk5Y=
R:libc.musl-x86_64.so.1
a:0:0:777
Z:Q17yJ3JFNypA4mxhJJr0ou6CzsJVI=

C:Q1Tl5YN79Rz6SUcbB0pB8o/fN5q4M=
P:libcrypto3
V:3.1.4-r5
A:x86_64
S:1814220
I:4415488
T:Crypto library from openssl
U:https://www.openssl.org/
L:Apache-2.0
o:openssl
m:Ariadne Conill <ariadne@dereferenced.org>
t:1705597262
c:1e1c2b9b8b2d5e3cfd6db7e8a6d7bbcdd7a1c2f3
D:so:libc.musl-x86_64.so.1
p:so:libcrypto.so.3=3
r:libcrypto1.1
F:lib
R:libcrypto.so.3
a:0:0:755
Z:Q1gT5Jr3Xyoq0W8Yd9m5HRwQkSM2o=

C:Q1WnCq8kNKsEJU0XkfwqFOGfrR4ak=
P:busybox
V:1.36.1-r15
A:x86_64
S:512350
I:947200
T:Size optimized toolbox of many common UNIX utilities
U:https://busybox.net/
L:GPL-2.0-only
o:busybox
m:Sören Tempel <soeren+alpine@soeren-tempel.net>
t:1701259036
c:2c4d6f9fb0d3e7d47c7e3e4c1f5a1d8f40e9aee8
D:so:libc.musl-x86_64.so.1 !busybox-static
p:/bin/sh cmd:busybox=1.36.1-r15 cmd:sh=1.36.1-r15
r:busybox-initscripts
F:bin
R:busybox
a:0:0:755
Z:Q1VFnQVcBWLBe4XURF0oS9BVFOejU=

C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAAA=
P:ssl_client
V:1.36.1-r15
A:x86_64
S:4967
I:14336
T:EXternal ssl_client for busybox wget
U:https://busybox.net/
L:GPL-2.0-only
o:busybox
m:Sören Tempel <soeren+alpine@soeren-tempel.net>
t:1701259036
c:2c4d6f9fb0d3e7d47c7e3e4c1f5a1d8f40e9aee8
D:so:libc.musl-x86_64.so.1 so:libcrypto.so.3 busybox>=1.36 so:libmissing.so.9
i:busybox=1.36.1-r15 libssl3
F:usr
F:usr/bin
R:ssl_client
a:0:0:755
Z:Q1Ww+G1LmxJ8YvTbYzL4+qPNVl6uA=

"""


def test_parse_installed() -> None:
    pkgs, problems = parse_apk_installed(INSTALLED.encode())
    assert problems == []
    assert [(p.name, p.version) for p in pkgs] == [
        ("musl", "1.2.4_git20230717-r4"),
        ("libcrypto3", "3.1.4-r5"),
        ("busybox", "1.36.1-r15"),
        ("ssl_client", "1.36.1-r15"),
    ]
    musl = pkgs[0]
    assert musl.arch == "x86_64"
    assert musl.license == "MIT"
    assert musl.origin == "musl"
    assert musl.maintainer == "Timo Teräs <timo.teras@iki.fi>"
    assert musl.installed_size == "667648"
    assert musl.provides == ["so:libc.musl-x86_64.so.1"]
    assert pkgs[2].depends == ["so:libc.musl-x86_64.so.1"]  # the !conflict is dropped
    assert pkgs[3].origin == "busybox"


def test_resolve_depends() -> None:
    pkgs, _ = parse_apk_installed(INSTALLED)
    deps = resolve_depends(pkgs)
    assert deps["musl"] == []
    assert deps["libcrypto3"] == ["musl"]
    assert deps["busybox"] == ["musl"]
    # so: capabilities and a versioned name resolve; the unknown soname is dropped
    assert deps["ssl_client"] == ["musl", "libcrypto3", "busybox"]


def test_purl() -> None:
    p = ApkPackage(name="musl", version="1.2.4_git20230717-r4", arch="x86_64")
    assert apk_purl(p, {"ID": "alpine", "VERSION_ID": "3.19.1"}) == (
        "pkg:apk/alpine/musl@1.2.4_git20230717-r4?arch=x86_64&distro=alpine-3.19.1"
    )
    assert apk_purl(p, {}) == "pkg:apk/alpine/musl@1.2.4_git20230717-r4?arch=x86_64"
    assert apk_purl(p, {"ID": "wolfi", "VERSION_ID": "20230201"}).startswith("pkg:apk/wolfi/")


def test_broken_stanzas_are_problems() -> None:
    text = "P:nover\nA:x86_64\n\nV:1.0\n\nP:ok\nV:2\n\ngarbage line\n\n"
    pkgs, problems = parse_apk_installed(text)
    assert [p.name for p in pkgs] == ["ok"]
    assert len(problems) == 2


def test_no_trailing_blank_line_and_crlf() -> None:
    pkgs, _ = parse_apk_installed("P:a\r\nV:1-r0\r\n\r\nP:b\r\nV:2-r0")
    assert [(p.name, p.version) for p in pkgs] == [("a", "1-r0"), ("b", "2-r0")]
