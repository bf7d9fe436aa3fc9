"""``gpusbom._fork.fork``: a stop signal that comes while ``os.fork`` runs its at-fork
callbacks is not lost (with a plain ``os.fork`` the handler's exception is printed and
dropped there, and a stopped scan would go on)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_SCRIPT = r"""
import os, signal, sys
from gpusbom import _fork

class Stop(Exception):
    pass

def handler(signum, frame):
    raise Stop

signal.signal(signal.SIGTERM, handler)
# the signal comes while the fork runs its callbacks (in the parent, before the fork)
os.register_at_fork(before=lambda: os.kill(os.getpid(), signal.SIGTERM))
fork = _fork.fork if sys.argv[1] == "held" else os.fork
try:
    pid = fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print("went on")
except Stop:
    os.waitpid(-1, 0)
    print("stopped")
"""


@pytest.mark.parametrize(("how", "expected"), [("held", "stopped"), ("plain", "went on")])
def test_a_signal_during_the_fork_is_delivered_after_it(how: str, expected: str) -> None:
    p = subprocess.run([sys.executable, "-c", _SCRIPT, how], capture_output=True, text=True,
                       timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == expected, p.stderr
    if how == "plain":  # what the held signals avoid: the handler's exception dropped
        assert "Exception ignored" in p.stderr
