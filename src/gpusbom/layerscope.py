"""``--scope all-layers`` (as Syft's): besides the squashed filesystem (what the image runs),
the components that only earlier layers had, i.e. that a later layer deleted, hid (opaque
directory) or replaced (an upgrade rewrote the package database), each with its layer
provenance.

For every layer but the last, the collectors run over the filesystem as it was after that
layer (``squash(layers[:k])``). A component found there and not in the final filesystem is
reported once, from the last such layer, with the properties ``layer-scope`` = ``deleted``
and ``deleted-by-layer`` (the diff_id of the layer after which it is gone); its evidence
names the layer that held it, as every component's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .collectors.base import Collector
    from .fsview.types import LayerIndex, Limits
    from .fsview.view import FsView
    from .model import Component, Target

SQUASHED = "squashed"
ALL_LAYERS = "all-layers"
SCOPES = (SQUASHED, ALL_LAYERS)


def earlier_views(layers: Sequence[LayerIndex], limits: Limits) -> list[FsView]:
    """The filesystem after each layer but the last (bottom first)."""
    from .fsview.squash import squash

    return [squash(layers[:k], limits) for k in range(1, len(layers))]


def _key(c: Component) -> tuple[str, str, str, str]:
    where = c.evidence[0].path if c.evidence else ""
    return (c.ecosystem or c.type.value, c.name, c.version or "", where or "")


def deleted_components(earlier: Sequence[FsView], final: Sequence[Component], target: Target,
                       classes: Sequence[type[Collector]],
                       exclude: Sequence[str] = ()) -> list[Component]:
    """The components of ``earlier`` views that ``final`` no longer has, marked as deleted
    with the layer that removed them (see the module docstring)."""
    from .collect import run_collectors

    present = {_key(c) for c in final}
    last_seen: dict[tuple[str, str, str, str], tuple[int, Component]] = {}
    for k, fs in enumerate(earlier):
        if exclude:
            from .fsview.exclude import exclude as without

            fs = without(fs, exclude)
        found, _unknowns = run_collectors(fs, target, classes)  # theirs are the final scan's
        for c in found:
            key = _key(c)
            if key not in present:
                last_seen[key] = (k, c)
    out: list[Component] = []
    layers = target.layers
    for key in sorted(last_seen):
        k, c = last_seen[key]
        # view k holds layers 0..k: the component is gone after layer k + 1
        gone = layers[k + 1] if k + 1 < len(layers) else None
        c.properties["layer-scope"] = "deleted"
        if gone is not None:
            c.properties["deleted-by-layer"] = gone.diff_id or gone.digest or str(gone.index)
        out.append(c)
    return out
