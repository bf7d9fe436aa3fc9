#!/usr/bin/env python3
"""Regenerate ``src/gpusbom/data/triton_releases.json``: Triton Inference Server version ->
NGC container release, read from a git copy of github.com/triton-inference-server/server
(each release branch ``rYY.MM`` holds the server version in its ``TRITON_VERSION`` file).

    scripts/build_triton_releases.py /path/to/server.git

Only facts are written: (server version, container release, the file it was read from).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "gpusbom" / "data" / "triton_releases.json"
URL = "https://github.com/triton-inference-server/server/blob/{branch}/TRITON_VERSION"


def main(argv: list[str]) -> int:
    repo = argv[0] if argv else "/work/.mirror/triton-inference-server+server/repo"
    refs = subprocess.run(["git", "-C", repo, "for-each-ref", "--format=%(refname:short)",
                           "refs/heads"], capture_output=True, text=True, check=True).stdout.split()
    rows = []
    for b in sorted(r for r in refs if re.fullmatch(r"r\d{2}\.\d{2}", r)):
        got = subprocess.run(["git", "-C", repo, "show", f"{b}:TRITON_VERSION"],
                             capture_output=True, text=True, check=False)
        ver = got.stdout.strip()
        if got.returncode != 0 or not re.fullmatch(r"\d+\.\d+\.\d+", ver):
            print(f"{b}: no released TRITON_VERSION ({ver or got.stderr.strip()!r}); skipped",
                  file=sys.stderr)
            continue
        rows.append({"server": ver, "container": b[1:], "source": URL.format(branch=b)})
    OUT.write_text(json.dumps({"releases": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(rows)} releases ({rows[0]['container']} .. {rows[-1]['container']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
