"""The report of a model loaded rather than compiled: from the compile cache
(hobbit.runtime.cache) or from a pickle of its machine code (hobbit.runtime.shipped)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hobbit.target import Target


@dataclass
class CachedReport:
    """The report of a model loaded from the cache: where from, how long loading took, and
    what a fresh compile's report also says about the code (the target and thread count it
    was built for, the packed weights); llvm_ir is None, as after any compile().

    The graph, memory plan and optimised module are not stored; compile with cache=False to
    get them."""

    path: str  # the entry's folder
    target: Target
    threads: int
    weights: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    cached: bool = True
    llvm_ir: None = None
    extra: dict | None = None  # what the compiler stored beside the code (store's `extra`)
    origin: str = ""  # what it was loaded from, in words: the cache entry, or a pickle (hobbit.runtime.shipped)

    def __getattr__(self, name: str) -> Any:
        if name in ("graph", "plan", "optimized"):
            raise AttributeError(f"report.{name} is not available: this model was loaded from "
                                 f"{self.origin or self.path}; compile with cache=False for the full report")
        raise AttributeError(name)
