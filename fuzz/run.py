"""Run one fuzz target under atheris (libFuzzer, coverage-guided).

    python fuzz/run.py TARGET [libFuzzer flags] [CORPUS_DIR ...]
    python fuzz/run.py --replay TARGET FILE_OR_DIR ...   (no atheris needed)

gpusbom's modules are instrumented for coverage as they are imported. A clean rejection
(``targets.REJECTS``) returns normally; anything else propagates and libFuzzer writes the
input to ``-artifact_prefix`` as ``crash-*`` (``timeout-*``, ``oom-*`` for hangs and
memory blow-ups). ``scripts/fuzz`` drives this for every target.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))
sys.setrecursionlimit(1000)  # the interpreter's default: a deep recursion is a finding


def replay(name: str, paths: list[str]) -> int:
    import traceback

    import targets

    bad = 0
    files = [p for a in paths for p in (sorted(Path(a).iterdir()) if Path(a).is_dir() else [Path(a)])]
    for f in files:
        try:
            targets.call(name, f.read_bytes())
        except Exception:  # noqa: BLE001 - report every failing input
            bad += 1
            print(f"{name}: {f}: FAILED", file=sys.stderr)
            traceback.print_exc()
    print(f"{name}: replayed {len(files)} inputs, {bad} failed", file=sys.stderr)
    return 1 if bad else 0


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--replay":
        return replay(args[1], args[2:])
    name = args[0]
    import atheris

    with atheris.instrument_imports(include=["gpusbom"]):
        import targets

        targets.preload()

    fn = targets.call
    if name not in targets.TARGETS:
        print(f"unknown target {name!r}; targets: {', '.join(targets.TARGETS)}", file=sys.stderr)
        return 2

    def one(data: bytes) -> None:
        fn(name, data)

    atheris.Setup([sys.argv[0], *args[1:]], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
