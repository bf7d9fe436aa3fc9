"""A private PostgreSQL cluster (Debian's server binaries) for tests and benchmarks.

``initdb`` refuses to run as root, so as root the cluster runs as the ``postgres`` user
(Debian's package creates it), else as ``nobody``. It listens on 127.0.0.1 on a free port
and on a unix socket in its own directory; local (socket) connections are trusted for the
admin role, TCP connections need a password (scram-sha-256), so a wrong password fails.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

from packaging.version import Version


def find_bindir() -> Path | None:
    cands = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    if not cands:
        return None
    return max(cands, key=lambda p: Version(p.parent.name) if p.parent.name[0].isdigit()
               else Version("0"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    user = "gpusbom"
    password = "s3cret-Pw"

    def __init__(self, bindir: Path, *, fast: bool = True) -> None:
        self.bindir = bindir
        self.fast = fast
        self.dir = Path(tempfile.mkdtemp(prefix="gpusbom-pg-"))
        self.data = self.dir / "data"
        self.sock = self.dir / "sock"
        self.port = _free_port()
        self._run_as: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    self._run_as = pwd.getpwnam(name)
                    break
                except KeyError:
                    continue
            if self._run_as is None:
                raise RuntimeError("running as root and no postgres/nobody user to run as")

    def _cmd(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        def demote() -> None:
            if self._run_as is not None:
                os.setgid(self._run_as.pw_gid)
                os.setuid(self._run_as.pw_uid)

        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8",
               "HOME": str(self.dir), "PGTZ": "UTC"}
        p = subprocess.run(list(args), preexec_fn=demote, env=env, capture_output=True,
                           text=True, timeout=timeout, cwd=str(self.dir))
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed ({p.returncode}): "
                               f"{p.stderr.strip()[-2000:]}\n{self.log_tail()}")
        return p.stdout

    def log_tail(self) -> str:
        try:
            return (self.dir / "log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def start(self) -> PgServer:
        self.sock.mkdir()
        if self._run_as is not None:
            for p in (self.dir, self.sock):
                os.chown(p, self._run_as.pw_uid, self._run_as.pw_gid)
        b = self.bindir
        self._cmd(str(b / "initdb"), "-D", str(self.data), "-U", "postgres", "-E", "UTF8",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "--no-instructions")
        opts = f"-k {self.sock} -h 127.0.0.1 -p {self.port} -c max_connections=120"
        if self.fast:  # a throw-away test cluster: durability is not what is tested
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._cmd(str(b / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"),
                  "-o", opts, "-w", "-t", "60", "start")
        self.psql(f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}'")
        return self

    def psql(self, sql: str, db: str = "postgres") -> str:
        return self._cmd(str(self.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                         "-h", str(self.sock), "-p", str(self.port), "-U", "postgres",
                         "-d", db, "-At", "-c", sql)

    def create_db(self, name: str | None = None) -> str:
        """A new empty database owned by the password user; returns its URL."""
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        self.psql(f'CREATE DATABASE "{name}" OWNER {self.user}')
        return self.url(name)

    def url(self, db: str, password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql://{self.user}:{pw}@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._cmd(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast",
                          "-w", "stop", check=False)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
