"""releases: every candidate version of a product is checked against the vendor release
lists of the fingerprint database (``gpusbom.fingerprints.releases``). A version that is
not a release of its product (a getter's constant decoded with the wrong rule, a file's own
numbering) is never reported: it is dropped from the candidates and kept as evidence in
``rejected-versions`` (the version, where it was read, why it is not a release); the next
candidate is reported, or none (``unknown``). The version reported says how it stands
against the lists: ``release-check`` ``release`` (a listed release or a short form of one)
or ``unlisted`` (the lists cannot say: an older line they do not cover, a newer release).

Generic: the database names the products and their releases; no product is named here.
"""

from __future__ import annotations

from .._gpu import Observations

__all__ = ["vet"]


def vet(obs: Observations) -> None:
    """Drop the candidate versions of ``obs`` that are not releases of their product."""
    items = [o for o in obs.items() if o.versions]
    if not items:
        return
    from ...fingerprints.active import load_active

    index = load_active().release_index()
    products = index.products()
    for o in items:
        if o.name not in products:
            continue
        kept: list[tuple[int, str, str]] = []
        rejected: list[str] = []
        for prio, version, source in o.versions:
            check = index.check(o.name, version)
            if check is not None and check.status == "rejected":
                rejected.append(f"{version} ({source}): {check.reason}")
            else:
                kept.append((prio, version, source))
        if rejected:
            o.versions[:] = kept
            old = o.properties.get("rejected-versions")
            note = "; ".join(sorted(set(rejected)))
            o.properties["rejected-versions"] = f"{old}; {note}" if old else note
        chosen = obs.chosen_version(o)
        check = index.check(o.name, chosen) if chosen else None
        if check is not None:
            o.properties["release-check"] = check.status
