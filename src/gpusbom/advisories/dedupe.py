"""One finding per CVE and file: two components that stand for the same file (a package
and the library it installs, a wheel and its vendored copy) each matched to the same CVE
of the same advisory are one finding, naming both components.

The finding kept is the first of the group in report order with the strongest status
(``affected`` > ``unsupported-branch`` > ``review`` > ``not-affected``); the others'
components are added to it. Findings without an evidence path are never merged.
"""

from __future__ import annotations

import dataclasses

from ..model import Finding

__all__ = ["merge_same_file"]

_RANK = {"affected": 0, "unsupported-branch": 1, "review": 2, "not-affected": 3}


def merge_same_file(findings: list[Finding]) -> list[Finding]:
    """``findings`` (sorted) with same-file duplicates merged; order kept."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, f in enumerate(findings):
        if f.advisory is None or not f.evidence:
            continue
        groups.setdefault((f.advisory.advisory, f.id, f.evidence[0]), []).append(i)
    drop: set[int] = set()
    replace: dict[int, Finding] = {}
    for idx in groups.values():
        if len(idx) < 2:
            continue
        best = min(idx, key=lambda i: (_RANK.get(findings[i].advisory.status, 9)  # type: ignore[union-attr]
                                       , i))
        refs = tuple(dict.fromkeys(r for i in idx for r in findings[i].components))
        replace[best] = dataclasses.replace(findings[best], components=refs)
        drop.update(i for i in idx if i != best)
    if not drop:
        return findings
    return [replace.get(i, f) for i, f in enumerate(findings) if i not in drop]
