"""Packed weight blobs shared by content, process-wide.

Variants of one model compiled for different input signatures (a symbolic sequence
length) usually pack the same constants into the same bytes. Keyed by the sha256 of the
blob, the variants then hold one array between them instead of one copy each; the store
holds only weak references, so a blob goes when its last variant does."""

from __future__ import annotations

import hashlib
import threading
import weakref

import numpy as np

_BLOBS: dict[str, weakref.ref] = {}
_LOCK = threading.RLock()  # re-entrant: a weakref callback may run while this thread holds it


def digest(blob: np.ndarray) -> str:
    """The sha256 of the blob's bytes, in hex: its name in memory and in the compile cache."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(blob).view(np.uint8).reshape(-1))).hexdigest()


def lookup(name: str) -> np.ndarray | None:
    """The live blob with this digest, if a variant still holds it."""
    with _LOCK:
        ref = _BLOBS.get(name)
        return ref() if ref is not None else None


def name_of(blob: np.ndarray) -> str | None:
    """The digest this very array is shared under, if it is a live shared blob."""
    with _LOCK:
        return next((name for name, ref in _BLOBS.items() if ref() is blob), None)


def share(blob: np.ndarray, name: str | None = None) -> np.ndarray:
    """The one live array with these bytes: `blob` itself the first time, the earlier array
    after that (and `blob` can be freed). `name` is the blob's digest when already known.
    Shared arrays are read-only: generated code only reads weights, and a write through one
    variant must not change another's answers."""
    name = name or digest(blob)
    blob.flags.writeable = False
    with _LOCK:
        ref = _BLOBS.get(name)
        live = ref() if ref is not None else None
        if live is not None:
            return live
        _BLOBS[name] = weakref.ref(blob, lambda _, key=name: _forget(key))
        return blob


def _forget(name: str) -> None:
    with _LOCK:
        ref = _BLOBS.get(name)
        if ref is not None and ref() is None:
            del _BLOBS[name]
