"""A dict that tells its subclass of every write, whichever dict method makes it: the base of the
tables that keep indexes beside their entries (the metadata cache's topics by id and by name
order, the controller's assignments by topic), so an index cannot miss a write made with
`pop`, `setdefault`, `update`, `|=` or `clear` rather than `[]=` and `del`.

Owns: `IndexedDict`, with the hooks `_added(key, value, old)` (after a key is set; `old` is the
value it replaced, None when the key is new: values are never None), `_removed(key, value)`
(after a key is deleted) and `_cleared()` (after `clear`). Reads are the dict's own, at C speed;
`copy.copy`, `deepcopy` and pickle rebuild a table of the subclass (whose `__init__` takes a
mapping), `.copy()` gives a plain dict. Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IndexedDict(dict[K, V]):
    def _added(self, key: K, value: V, old: V | None) -> None:
        """A key was set to `value` (replacing `old`, None when new)."""

    def _removed(self, key: K, value: V) -> None:
        """A key holding `value` was deleted."""

    def _cleared(self) -> None:
        """Every key was deleted."""

    def __setitem__(self, key: K, value: V) -> None:
        old = super().get(key)
        super().__setitem__(key, value)
        self._added(key, value, old)

    def __delitem__(self, key: K) -> None:
        value = super().__getitem__(key)
        super().__delitem__(key)
        self._removed(key, value)

    def pop(self, key: K, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[K, V]:
        if not self:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self))
        return key, self.pop(key)

    def setdefault(self, key: K, default: V) -> V:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *others: Any, **named: Any) -> None:
        for other in others:
            for key, value in other.items() if isinstance(other, Mapping) else other:
                self[key] = value
        for key, value in named.items():
            self[key] = value  # type: ignore[index]

    def __ior__(self, other: Any) -> IndexedDict[K, V]:  # type: ignore[override, misc]
        self.update(other)
        return self

    def clear(self) -> None:
        super().clear()
        self._cleared()

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied, deep-copied and pickled by building a new table from the entries, so the copy
        has indexes of its own (a shallow copy would share, and corrupt, the original's)."""
        return (type(self), (dict(self),))
