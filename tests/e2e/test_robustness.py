"""Input classes that once crashed or silently dropped data, through the CLI as a user runs it.

- file names that are not UTF-8 (legal in tar, common from old locales): the scan succeeds
  and every SBOM carries them in the documented escaped form (``\\xNN``), losslessly;
- NUL and control characters in names, labels and env values: escaped the same way;
- deeply nested JSON in an image config: exit 3 with one line (or parsed when the depth
  stays under the bound, inside a field gpusbom ignores);
- a 100 MB dpkg status: parsed (streamed from a temp file), within the memory bound; a file
  over ``--max-file-size`` becomes an unknown that says what to pass;
- image env values that look like secrets: redacted unless ``--keep-env-secrets``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import imagetools as it
from gpusbom.safetext import REDACTED, escape_path, unescape_text

OS_RELEASE = ("/etc/os-release", b'ID=debian\nVERSION_ID="12"\n')
SITE = b"/usr/local/lib/python3.11/site-packages/"


def _s(b: bytes) -> str:
    """A tar member name from raw bytes (how gpusbom and tarfile decode them)."""
    return b.decode("utf-8", "surrogateescape")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpusbom", *args], capture_output=True, text=True, timeout=300
    )


def _scan(layout: Path, tmp_path: Path, *extra: str, formats: tuple[str, ...] = ("json",)
          ) -> tuple[subprocess.CompletedProcess[str], dict[str, Path]]:
    outs = {f: tmp_path / f"out.{f}" for f in formats}
    args = [a for f, p in outs.items() for a in ("-o", f"{f}={p}")]
    proc = run_cli("scan", "--image", f"oci:{layout}:t", "-q", *args, *extra)
    return proc, outs


# --------------------------------------------------------------------------- non-UTF-8 names

RAW_NAMES = [
    SITE + b"caf\xe9-1.0.dist-info/METADATA",
    b"/opt/caf\xe9/lib/libcudart.so.12.4.127",
    b"/opt/x\xff\xfe/lib/libcublas.so.12.4.5.8",
]


@pytest.fixture(scope="module")
def latin1_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    layer = [
        OS_RELEASE,
        (_s(RAW_NAMES[0]), b"Metadata-Version: 2.1\nName: caf\nVersion: 1.0\n"),
        (_s(SITE + b"caf\xe9-1.0.dist-info/RECORD"), b"caf\xe9/__init__.py,,\n"),
        (_s(RAW_NAMES[1]), b"\x7fELF" + bytes(100)),
        (_s(RAW_NAMES[2]), b"\x7fELF" + bytes(100)),
        ("/var/lib/dpkg/status",
         b"Package: ab\nStatus: install ok installed\nVersion: 1.0\nArchitecture: amd64\n\n"),
        ("/var/lib/dpkg/info/ab.list", b"/usr/share/doc/x\xff\n/usr/share/doc/x\xff/a\n"),
        (_s(b"/usr/share/doc/x\xff/a"), b"x"),
    ]
    image = it.build_image([layer], labels={"org.example.note": "a\x00b\x07c"},
                           env={"WEIRD": "v\x00\x1b[31m"})
    return it.write_oci_layout(tmp_path_factory.mktemp("latin1") / "layout", image, tag="t")


def test_non_utf8_names_every_format(latin1_image: Path, tmp_path: Path) -> None:
    formats = ("json", "cyclonedx-json", "cyclonedx-xml", "spdx-json", "spdx-tag-value", "table")
    proc, outs = _scan(latin1_image, tmp_path, formats=formats)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for fmt, path in outs.items():
        text = path.read_bytes().decode("utf-8")  # every output is valid UTF-8
        assert "\x00" not in text, fmt
    doc = json.loads(outs["json"].read_text())
    paths = {ev["path"] for c in doc["components"] for ev in c["evidence"] if ev.get("path")}
    for raw in RAW_NAMES:
        escaped = escape_path(_s(raw))
        assert "\\x" in escaped
        assert escaped in paths, (escaped, sorted(paths))
        # lossless: the escaped form gives back the original bytes
        assert os.fsencode(unescape_text(escaped)) == raw
    cdx = outs["cyclonedx-json"].read_text()
    assert json.dumps(escape_path(_s(RAW_NAMES[1])))[1:-1] in cdx
    # labels and env values: NUL and escape sequences are visible, never raw
    assert doc["target"]["labels"]["org.example.note"] == "a\\x00b\\x07c"
    assert doc["target"]["env"]["WEIRD"] == "v\\x00\\x1b[31m"


def test_escaping_is_lossless_and_leaves_plain_text_alone() -> None:
    for s in ["caf\udce9", "a\\xe9", "a\\\\", "x\x00y\nz", "\\\\x", "/usr/lib/x86_64"]:
        assert unescape_text(escape_path(s)) == s
    assert escape_path("/usr/lib/libcuda.so.1") == "/usr/lib/libcuda.so.1"
    assert escape_path("C:\\Program Files") == "C:\\Program Files"


# --------------------------------------------------------------------------- deep JSON


def _layout_with_config(tmp_path: Path, mutate) -> Path:  # type: ignore[no-untyped-def]
    image = it.build_image([[OS_RELEASE]])
    files = it.oci_layout_files(image, tag="t")
    config = json.loads(image.config_bytes)
    cbytes = mutate(config)
    files.pop(f"blobs/sha256/{image.config_digest.split(':')[1]}")
    files[f"blobs/sha256/{it.sha256(cbytes).split(':')[1]}"] = cbytes
    manifest = json.loads(image.manifest_bytes)
    manifest["config"]["digest"] = it.sha256(cbytes)
    manifest["config"]["size"] = len(cbytes)
    mbytes = json.dumps(manifest).encode()
    files.pop(f"blobs/sha256/{image.manifest_digest.split(':')[1]}")
    files[f"blobs/sha256/{it.sha256(mbytes).split(':')[1]}"] = mbytes
    index = json.loads(files["index.json"])
    index["manifests"][0]["digest"] = it.sha256(mbytes)
    index["manifests"][0]["size"] = len(mbytes)
    files["index.json"] = json.dumps(index).encode()
    return it.write_files(tmp_path / "layout", files)


def test_deeply_nested_config_is_one_line_exit_3(tmp_path: Path) -> None:
    def deep(config: dict[str, object]) -> bytes:
        body = json.dumps(config).encode()
        return body[:-1] + b', "x-extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

    layout = _layout_with_config(tmp_path, deep)
    out = tmp_path / "o" / "sbom.json"
    proc = run_cli("scan", "--image", f"oci:{layout}:t", "-q", "-o", f"json={out}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("gpusbom: error: "), proc.stderr
    assert "nested deeper than" in lines[0] and "config" in lines[0]
    assert not out.exists()


def test_moderately_nested_ignored_field_is_parsed(tmp_path: Path) -> None:
    def nested(config: dict[str, object]) -> bytes:
        body = json.dumps(config).encode()
        return body[:-1] + b', "x-extra": ' + b"[" * 100 + b"]" * 100 + b"}"

    layout = _layout_with_config(tmp_path, nested)
    proc, outs = _scan(layout, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(outs["json"].read_text())["target"]["os_release"]["ID"] == "debian"


# --------------------------------------------------------------------------- big package DB

BIG = 100 << 20


def _dpkg_status(size: int) -> tuple[bytes, int]:
    desc = "".join(f" line {i} of a long description, as real packages have, padded ....\n"
                   for i in range(60))
    parts: list[str] = []
    total = n = 0
    while total < size:
        st = (f"Package: pkg{n}\nStatus: install ok installed\nPriority: optional\n"
              f"Section: libs\nInstalled-Size: 123\nMaintainer: A <a@example.org>\n"
              f"Architecture: amd64\nVersion: 1.{n}-1\nDepends: libc6 (>= 2.36)\n"
              f"Description: package {n}\n{desc}\n")
        parts.append(st)
        total += len(st)
        n += 1
    return "".join(parts).encode(), n


@pytest.fixture(scope="module")
def big_dpkg_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    data, n = _dpkg_status(BIG)
    image = it.build_image([[OS_RELEASE, ("/var/lib/dpkg/status", data)]], compression="none")
    layout = it.write_oci_layout(tmp_path_factory.mktemp("bigdpkg") / "layout", image, tag="t")
    return layout, n, len(data)


def test_100mb_dpkg_status_is_parsed_within_memory_bound(
    big_dpkg_image: tuple[Path, int, int], tmp_path: Path
) -> None:
    layout, n, _ = big_dpkg_image
    # The peak is read inside a wrapper process whose only children are the scan and its own
    # children: this process's RUSAGE_CHILDREN would also count any earlier test's process that
    # subprocess reaps late (an abandoned Popen is waited for when the next one starts).
    out = tmp_path / "out.json"
    peak_file = tmp_path / "peak-kib"
    wrapper = (
        "import resource, subprocess, sys\n"
        "rc = subprocess.run(sys.argv[2:]).returncode\n"
        "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, str(peak_file), sys.executable, "-m", "gpusbom",
         "scan", "--image", f"oci:{layout}:t", "-q", "-o", f"json={out}"],
        capture_output=True, text=True, timeout=300,
    )
    outs = {"json": out}
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(peak_file.read_text())
    doc = json.loads(outs["json"].read_text())
    debs = [c for c in doc["components"] if c.get("ecosystem") == "deb"]
    assert len(debs) == n
    assert not [u for u in doc["unknowns"] if "status" in (u.get("path") or "")]
    # the file is streamed from a temp file, never held whole: the peak is the packages' own
    # objects plus the interpreter, far below what holding and splitting 100 MB would need
    assert 0 < peak_kib < 400 * 1024, peak_kib


def test_file_over_max_file_size_says_what_to_pass(
    big_dpkg_image: tuple[Path, int, int], tmp_path: Path
) -> None:
    layout, _, size = big_dpkg_image
    proc, outs = _scan(layout, tmp_path, "--max-file-size", "50M")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(outs["json"].read_text())
    reasons = [u["reason"] for u in doc["unknowns"] if u.get("path") == "/var/lib/dpkg/status"]
    assert len(reasons) == 1, doc["unknowns"]
    need = -(-size // (1 << 20))
    assert f"--max-file-size {need}M" in reasons[0]
    assert str(size) in reasons[0] and "50 MiB" in reasons[0]


def test_max_file_size_usage_error(tmp_path: Path) -> None:
    proc = run_cli("scan", "--image", "oci:/nonexistent:t", "-q", "--max-file-size", "lots")
    assert proc.returncode == 2, proc.stderr
    assert "--max-file-size" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- env secrets

SECRETS = {
    "GITHUB_TOKEN": "ghp_S3cretValue000000000000000000000",
    "DB_PASSWORD": "hunter2-very-secret",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRET",
    "SERVICE_URL": "https://deploy:url-pass-secret@git.example.org/repo",
}


@pytest.fixture(scope="module")
def secret_env_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    image = it.build_image([[OS_RELEASE]], env={**SECRETS, "CUDA_VERSION": "12.4.1"})
    return it.write_oci_layout(tmp_path_factory.mktemp("envsec") / "layout", image, tag="t")


def test_env_secrets_redacted_by_default(secret_env_image: Path, tmp_path: Path) -> None:
    formats = ("json", "cyclonedx-json", "cyclonedx-xml", "spdx-json", "spdx-tag-value", "table")
    proc, outs = _scan(secret_env_image, tmp_path, formats=formats)
    assert proc.returncode == 0, proc.stderr
    secret_values = ["ghp_S3cretValue", "hunter2-very-secret", "wJalrXUtnFEMI", "url-pass-secret"]
    for fmt, path in outs.items():
        text = path.read_text()
        for v in secret_values:
            assert v not in text, (fmt, v)
    for v in secret_values:
        assert v not in proc.stderr and v not in proc.stdout
    env = json.loads(outs["json"].read_text())["target"]["env"]
    assert env["GITHUB_TOKEN"] == REDACTED
    assert env["SERVICE_URL"] == f"https://deploy:{REDACTED}@git.example.org/repo"
    assert env["CUDA_VERSION"] == "12.4.1"  # ordinary values stay
    assert "image:env:DB_PASSWORD" in outs["cyclonedx-json"].read_text()


def test_keep_env_secrets_opts_out(secret_env_image: Path, tmp_path: Path) -> None:
    proc, outs = _scan(secret_env_image, tmp_path, "--keep-env-secrets")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(outs["json"].read_text())["target"]["env"] == {
        **SECRETS, "CUDA_VERSION": "12.4.1"}
