"""Apply layer indexes bottom to top into one ``FsView``.

For each layer, in order: its opaque directories hide everything below them
from lower layers; its whiteouts delete paths (and their subtrees) from lower
layers; regular files it wrote but did not keep (unmatched, known only by path
hash) delete the lower entries they replace; then its own entries are added.
A non-directory replacing a directory removes the directory's subtree. Parents
missing from a tar are synthesised as directories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import UnsafeArchiveError
from .layer import shadow_salt
from .types import Entry, EntryKind, LayerIndex, Limits
from .view import FsView

_DIR = EntryKind.DIR


def _parent(path: str) -> str:
    i = path.rfind("/")
    return path[:i] if i > 0 else "/"


class _State:
    def __init__(self, keyed: Callable[[str], int] | None = None) -> None:
        self.entries: dict[str, Entry] = {}
        self.children: dict[str, set[str]] = {}
        self.history: dict[str, list[Entry]] = {}
        self.by_hash: dict[int, str] = {}
        # the same under the layer cache's keyed hash, when some layer was hashed with it
        self.keyed = keyed
        self.by_key: dict[int, str] = {}

    def _index(self, path: str) -> None:
        self.by_hash[hash(path)] = path
        if self.keyed is not None:
            self.by_key[self.keyed(path)] = path

    def remove(self, path: str, keep_self: bool = False) -> None:
        """Remove ``path`` and everything below it (only below it with ``keep_self``)."""
        entries = self.entries
        children = self.children
        if not keep_self:
            if path not in entries and path not in children:
                return
            par = children.get(_parent(path))
            if par is not None:
                par.discard(path)
            stack = [path]
        else:
            kids = children.get(path)
            if not kids:
                return
            stack = list(kids)
            kids.clear()
        history = self.history
        by_hash = self.by_hash
        keyed = self.keyed
        while stack:
            p = stack.pop()
            if entries.pop(p, None) is not None:
                by_hash.pop(hash(p), None)
                if keyed is not None:
                    self.by_key.pop(keyed(p), None)
            history.pop(p, None)
            kids = children.pop(p, None)
            if kids:
                stack.extend(kids)

    def _ensure_parent(self, path: str, layer: int) -> None:
        entries = self.entries
        children = self.children
        child = path
        while child != "/":
            par = _parent(child)
            kids = children.get(par)
            if kids is None:
                children[par] = {child}
            else:
                kids.add(child)
            pe = entries.get(par)
            if pe is not None and pe.kind is _DIR:
                return
            entries[par] = Entry(par, _DIR, mode=0o755, layer=layer)
            self._index(par)
            if pe is not None:
                # a file or link where this layer has a directory; its parents exist
                self.history.pop(par, None)
                return
            child = par

    def add(self, e: Entry) -> None:
        path = e.path
        entries = self.entries
        old = entries.get(path)
        if old is not None:
            if old.kind is _DIR and e.kind is not _DIR:
                self.remove(path, keep_self=True)
            if not e.history:
                self.history.pop(path, None)
        elif path != "/":
            self._ensure_parent(path, e.layer)
        entries[path] = e
        self._index(path)
        if e.history:
            h = self.history.get(path)
            if h is None:
                self.history[path] = [e]
            else:
                h.append(e)


def squash(layers: Sequence[LayerIndex], limits: Limits | None = None) -> FsView:
    """Apply ``layers`` (bottom first) and return the resulting read-only view."""
    limits = limits or Limits()
    key = next((la.shadow_key for la in layers if la.shadow_key is not None), None)
    keyed_salt = None
    keyed = None
    if key is not None:
        from .layercache import keyed_shadow_hash, keyed_shadow_salt

        keyed, keyed_salt = keyed_shadow_hash(key), keyed_shadow_salt(key)
    st = _State(keyed)
    salt = shadow_salt()
    max_kept = limits.max_kept_records
    for layer in layers:
        for d in sorted(layer.opaque_dirs):
            st.remove(d, keep_self=True)
        for w in sorted(layer.whiteouts):
            st.remove(w)
        index = (
            st.by_hash
            if layer.shadow_salt == salt
            else st.by_key
            if keyed_salt is not None and layer.shadow_salt == keyed_salt
            else None
        )
        if len(layer.shadow_hashes) and index:
            hits = index.keys() & layer.shadow_hashes  # iterates the array in C
            for h in hits:
                p = index.get(h)
                if p is not None and p not in layer.entries:
                    st.remove(p)
        for path in sorted(layer.entries):
            st.add(layer.entries[path])
        kept = len(st.entries) + sum(len(h) for h in st.history.values())
        if kept > max_kept:
            raise UnsafeArchiveError(
                f"more than {max_kept} kept records (directories, links, matched files) "
                f"after layer {layer.ref.index}"
            )
    view = FsView(
        st.entries,
        [layer.ref for layer in layers],
        limits,
        history={p: h for p, h in st.history.items() if len(h) > 0},
        children=st.children,
    )
    view.file_count = sum(layer.file_count for layer in layers)
    return view
