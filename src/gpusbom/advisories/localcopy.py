"""Local git copies of what an advisory feed publishes, as the bundle builder reads them
(``scripts/build_advisory_bundle.py``, through a feed's ``from_local``): the blobs of one
commit, read through one ``git cat-file --batch``; the copy's commit date; and its
``owner/name`` when it is a ``fetch`` mirror. Git must be on ``PATH``."""

from __future__ import annotations

import subprocess  # noqa: S404 - git reads the copy; the arguments are paths, no shell
from pathlib import Path

__all__ = ["GitCopy", "is_git_dir", "origin"]


class GitCopy:
    """Blobs of the ``HEAD`` commit of a git directory (a work tree or a bare mirror)."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.commit = self._git("rev-parse", "HEAD").strip()
        self.files = self._git("ls-tree", "-r", "--name-only", "HEAD").split("\n")
        self._p = subprocess.Popen(["git", "-C", repo, "cat-file", "--batch"],  # noqa: S603, S607
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", self.repo, *args], check=True,  # noqa: S603, S607
                              capture_output=True, text=True).stdout

    def date(self) -> str:
        """The ``HEAD`` commit's date (``YYYY-MM-DD``): the copy's data date."""
        return self._git("log", "-1", "--format=%cI").strip()[:10]

    def read(self, path: str) -> bytes | None:
        """The blob at ``path``, None when there is none."""
        assert self._p.stdin is not None and self._p.stdout is not None  # noqa: S101 - PIPEs
        self._p.stdin.write(f"{self.commit}:{path}\n".encode())
        self._p.stdin.flush()
        header = self._p.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            return None
        data = self._p.stdout.read(int(header[2]))
        self._p.stdout.read(1)
        return data


def is_git_dir(path: str) -> bool:
    """A git directory (bare) or a work tree with one."""
    return Path(path, "HEAD").exists() or (Path(path) / ".git").exists()


def origin(gitdir: str) -> str:
    """``owner/name`` of a ``fetch`` mirror (``.../owner+name/repo``), else the path."""
    parts = Path(gitdir).resolve().parts
    return parts[-2].replace("+", "/", 1) if len(parts) > 1 and parts[-1] == "repo" else gitdir
