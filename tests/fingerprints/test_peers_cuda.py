"""benchmarks/peers_cuda.py's scoring (#38): what counts as an identification, an exact
version, a short form, a wrong version and a miss; and gpusbom's database in cudabom's
schema (the peer is run with it to separate its matching from its data)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from peers_cuda import gpusbom_db_for_cudabom, score  # noqa: E402


def test_score() -> None:
    truth = {"cudart": "12.1.105+12.4.127", "cublas": "10.2.2.89", "cudnn": "7.6.5.32",
             "nccl": "2.4.8"}
    s = score(truth, {("cudart", "12.4.127"), ("cudart", "12.x"), ("cublas", "1.2.2"),
                      ("cudnn", "7.6.5")})
    # cudart: 12.4.127 exact, 12.1.105 only as "12.x" (short); cuBLAS 1.2.2 wrong; cuDNN
    # 7.6.5 short; NCCL missed
    assert (s.identified, s.exact, s.short, s.wrong, s.missed) == (4, 1, 2, 1, 1)
    assert s.wrong_list == ["cublas 1.2.2 (is 10.2.2.89)"]
    nothing = score(truth, set())
    assert (nothing.identified, nothing.missed) == (0, 5)


def test_gpusbom_db_in_cudabom_schema(tmp_path: Path) -> None:
    from gpusbom.fingerprints.active import load_active

    doc = json.loads(gpusbom_db_for_cudabom(tmp_path / "db.json").read_text())
    assert doc["schema_version"] == 3
    comps = {c["name"]: c for c in doc["components"]}
    rec = next(r for r in load_active().records if r.product == "cudart" and r.build_id)
    assert rec.version in comps["cudart"]["file_hashes"][rec.sha256]
    assert rec.version in comps["cudart"]["build_ids"][rec.build_id]
    assert "libcudart.so" in comps["cudart"]["soname_stems"]
