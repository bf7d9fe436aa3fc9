"""Registry credentials and tokens never appear in any output, log, error line or SBOM.

Every output of a succeeding and of a failing run (stdout, stderr with --debug logs, every
SBOM format) is searched for the password and for every bearer token the token server
issued during the run.
"""

from __future__ import annotations

from pathlib import Path

from reg_images import app_image
from regutil import PASSWORD, USER, Registry
from test_registry_source import cli, one_line_error, push_app

FORMATS = ("json", "cyclonedx-json", "cyclonedx-xml", "spdx-json", "spdx-tag-value", "spdx3-json",
           "table")


def _secrets(registry: Registry) -> list[str]:
    ts = registry.extra["token_server"]
    out = [PASSWORD]
    for t in ts.tokens:  # type: ignore[attr-defined]
        out += [t, t.rsplit(".", 1)[-1]]  # the whole JWT and its signature alone
    return out


def test_no_registry_secret_in_any_output(
    registry_token: Registry, tmp_path: Path, docker_config: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    push_app(registry_token, work, "private/leak:v1", app_image("amd64", seed=7))
    host = registry_token.host
    ts = registry_token.extra["token_server"]
    before = len(ts.tokens)  # type: ignore[attr-defined]
    outs = [tmp_path / f"sbom.{f}" for f in FORMATS]
    args = ["--image", f"registry:{host}/private/leak:v1", "--insecure-registry", host, "--debug",
            "--username", USER, "--password-stdin"]
    ok = cli([*args, *[a for f, o in zip(FORMATS, outs) for a in ("-o", f"{f}={o}")]],
             stdin=PASSWORD + "\n")
    assert ok.returncode == 0, ok.stderr
    assert len(ts.tokens) > before  # type: ignore[attr-defined]  # the token flow ran
    bad = cli(args, stdin="not-the-" + PASSWORD + "\n")
    one_line_error(bad, "authentication failed")
    texts = [ok.stdout, ok.stderr, bad.stdout, bad.stderr] + [o.read_text() for o in outs]
    for secret in _secrets(registry_token):
        for text in texts:
            assert secret not in text
    assert "not-the-" not in bad.stderr
