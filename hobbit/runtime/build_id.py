"""Which hobbit made a piece of native code: its version and a hash of its source files.

Generated code calls hobbit's own thread runtime, whose ABI is hobbit's, and an edited
compiler may emit other code for the same model; so the compile cache keys its entries by
this, and a pickle of machine code (hobbit.runtime.shipped) runs only where it matches. It
imports nothing heavy: a worker that unpickles a model pays for what running it needs."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from hobbit.version import __version__

# Bumped when what a pickle of native code holds changes shape (hobbit.runtime.shipped).
SHIPPED_FORMAT = 1


@functools.cache
def source_hash() -> str:
    """Every .py file of the hobbit package, each length-prefixed: an edited compiler gets new keys."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        h.update(f"{path.relative_to(root).as_posix()}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def made_by() -> str:
    """This hobbit, as a pickle of its native code records it."""
    return f"hobbit {__version__}, sources {source_hash()[:16]}, pickle format {SHIPPED_FORMAT}"
