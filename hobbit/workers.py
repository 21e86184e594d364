"""What a worker of a distributed engine runs (hobbit.ray, hobbit.dask): the model, placed and
sized where the engine put the worker."""

from __future__ import annotations

import os
from typing import Any

from hobbit.runtime.cpus import cap_threads


def worker_model(model: Any, threads: int) -> Any:
    """The model a worker runs, with every inference of the process capped at `threads`
    threads: a compiled model as it arrived (unpickled from its machine code:
    hobbit.runtime.shipped), an exported library's folder loaded (hobbit.load), or a model
    file compiled here for `threads`."""
    cap_threads(threads)
    if not isinstance(model, (str, os.PathLike)):
        return model
    # Imported here: a worker handed a compiled model never loads the compiler's modules.
    from hobbit.compiler import compile
    from hobbit.runtime.load import load
    if os.path.isdir(model) and not os.path.exists(os.path.join(model, "saved_model.pb")):
        return load(model)
    return compile(model, threads=threads)
