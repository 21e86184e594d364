"""Compiled models pickled as what they run: machine code and packed weights.

A Ray actor or a Dask worker that unpickles a model should run it at once: no compile, no
LLVM optimisation, no shared compile cache. So `pickle.dumps(model)` carries, for a
CompiledModel, the ELF object MCJIT made of it, its packed weights, the sha256 of each, and
what run() needs besides (arena size, input and output specs, the thread count it was built
for). Unpickling checks, before any code is mapped, that

- hobbit made it with these very sources (its version and the hash of its .py files, as the
  compile cache keys entries): generated code calls hobbit's thread runtime, whose ABI is
  hobbit's own, so code from another build is refused (ArtifactError);
- this CPU runs the code: the target's CPU features are the host's or a subset (TargetError);
- the code and the weights match their sha256s (ArtifactError);

then maps the code as a compile-cache hit does (hobbit.runtime.jit.jit_engine). The checks
catch a pickle from another hobbit or another CPU and one damaged on its way; they are no
defence against a malicious pickle, which runs any code it likes while it unpickles: as
Python's pickle documentation says, unpickle only what you trust.

The weights travel as a numpy array, so protocol 5 (Ray's and Dask's) sends them out of
band: Ray hands an actor a read-only view of its object store, shared by every actor on the
node, with no copy; an array that arrives unaligned for the kernels' aligned vector loads is
copied once to a 64-byte boundary. In one process (copy.deepcopy) the copy shares the blob of
the original by its digest (hobbit.runtime.weights).

A DynamicModel ships its current module, a SpecializingModel the variants it has compiled
(and its batch chunking), each as above, with the recipe (hobbit.runtime.recipe) for what
they may compile later: a DynamicModel growing past its bound, or a SpecializingModel meeting
a new input signature, compiles from the recipe in the process that needs it. So their
pickles hold the model file too (the recipe's portable form), where a CompiledModel's do not.
A GpuModel ships its PTX (and cubin), launches and weights.

The other pickle is the recipe's: `pickle.dumps(model.recipe)` holds the model and compile()'s
arguments; `recipe.compile()` after unpickling compiles again (a cache hit where the cache
has the entry). It is the one to keep across a hobbit upgrade or to move to another CPU."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from hobbit.errors import ArtifactError, TargetError
from hobbit.runtime import weights as shared_weights
from hobbit.runtime.allocation import ALIGN, aligned_empty
from hobbit.runtime.build_id import made_by
from hobbit.runtime.export import NativeModel
from hobbit.runtime.loaded_report import CachedReport
from hobbit.runtime.recipe import Recipe, reduce_with_recipe
from hobbit.target import host_target

_ORIGIN = "a pickle of its machine code"


@dataclass(frozen=True)
class ShippedCode:
    """A CompiledModel as it travels: the export's view of it (NativeModel) and two digests."""

    made_by: str
    native: NativeModel
    code_sha256: str
    weights_sha256: str


def reduce_compiled(model: Any) -> tuple:
    """CompiledModel.__reduce__: its machine code and weights, or its recipe where it kept no
    machine code (MCJIT handed none to the object cache)."""
    native = model.native_model()
    if native.code is None:
        return reduce_with_recipe(model)
    shipped = ShippedCode(made_by(), native, _sha256(native.code), _weights_digest(native.weights))
    return restore_compiled, (type(model), shipped)


def restore_compiled(cls: type, shipped: ShippedCode) -> Any:
    """Unpickling a CompiledModel (`cls`): checked (see the module docstring), then mapped."""
    t0 = time.perf_counter()
    native = shipped.native
    _check_maker(shipped.made_by)
    why = native.target.runs_on(host_target())
    if why is not None:
        raise TargetError(f"cannot run this pickled model here: {why}. Pickle model.recipe instead (it compiles "
                          f"again where it is unpickled), or compile for a target every machine has")
    if _sha256(native.code) != shipped.code_sha256:
        raise ArtifactError("the machine code in this pickled model does not match its sha256: the pickle is damaged")
    weights = _placed(native.weights, shipped.weights_sha256)
    report = CachedReport("", native.target, native.threads, weights, {"checks": time.perf_counter() - t0},
                          cached=False, origin=_ORIGIN)
    t0 = time.perf_counter()
    model = cls(native.code, native.target, weights, native.arena_bytes, native.inputs, native.outputs,
                report, layout=native.layout)
    report.seconds["jit"] = time.perf_counter() - t0
    return model


def _check_maker(maker: str) -> None:
    if maker != made_by():
        raise ArtifactError(f"this pickled model holds machine code made by {maker}, and this process runs "
                            f"{made_by()}: native code travels only between identical hobbit builds. Pickle "
                            f"model.recipe to keep a model across versions (it compiles again when unpickled)")


def _sha256(data: bytes | np.ndarray) -> str:
    return hashlib.sha256(memoryview(data).cast("B")).hexdigest()


def _weights_digest(weights: np.ndarray) -> str:
    """The blob's sha256: the name it is shared under in this process, else computed."""
    return shared_weights.name_of(weights) or shared_weights.digest(weights)


def _placed(weights: np.ndarray, digest: str) -> np.ndarray:
    """The unpickled blob, checked and ready for the kernels: the live blob of the same bytes
    where this process has one (no second copy), else this one, aligned."""
    live = shared_weights.lookup(digest)
    if live is not None and live.nbytes == weights.nbytes:
        return live
    flat = weights.reshape(-1).view(np.uint8)
    if shared_weights.digest(flat) != digest:
        raise ArtifactError("the weights in this pickled model do not match their sha256: the pickle is damaged")
    if flat.ctypes.data % ALIGN:
        aligned = aligned_empty(flat.nbytes)
        aligned[:] = flat
        flat = aligned
    return shared_weights.share(flat, digest)


# -- models that may compile again later: their modules as code, plus the recipe ---------
class LaterCompiles:
    """What an unpickled DynamicModel or SpecializingModel compiles with when it must: the
    same model compiled again from its recipe, once, on the first need (a bound past the
    shipped one, a new input signature), whose own builders it then uses."""

    def __init__(self, recipe: Recipe):
        self._recipe = recipe
        self._model = None
        self._lock = threading.Lock()

    def _fresh(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._recipe.compile()
            return self._model

    def build(self, *args: Any) -> Any:
        return self._fresh()._build(*args)

    def import_graph(self, shapes: dict) -> Any:
        return self._fresh()._importer(shapes)


def reduce_stateful(model: Any, local: tuple[str, ...]) -> tuple:
    """__reduce__ of a DynamicModel or SpecializingModel made by hobbit.compile: its state,
    whose compiled modules pickle as code, without the attributes named in `local` (its
    builders, locks, thread-local buffers), which its `restored` makes again. A model with
    another kind of recipe (hobbit.load's: a library's folder) travels as that recipe."""
    if not isinstance(model.recipe, Recipe):
        return reduce_with_recipe(model)
    state = {k: v for k, v in vars(model).items() if k not in local}
    return restore_stateful, (type(model), made_by(), state)


def restore_stateful(cls: type, maker: str, state: dict) -> Any:
    _check_maker(maker)
    model = cls.__new__(cls)
    vars(model).update(state)
    model.restored(LaterCompiles(state["recipe"]))
    return model


# -- GPU models ---------------------------------------------------------------------------
_GPU_LOCAL = ("host_module", "report", "_device", "_emulator")


def reduce_gpu(model: Any) -> tuple:
    """GpuModel.__reduce__: the device code, launches, weights and specs; not the host build of
    its kernels (emulate() needs the compile) nor its open device state. A model hobbit.load
    made travels as its folder, as a loaded CPU library does."""
    if model.recipe is not None and not isinstance(model.recipe, Recipe):
        return reduce_with_recipe(model)
    state = {f.name: getattr(model, f.name) for f in fields(model) if f.name not in _GPU_LOCAL}
    return restore_gpu, (type(model), made_by(), state, _weights_digest(model.weights))


def restore_gpu(cls: type, maker: str, state: dict, digest: str) -> Any:
    _check_maker(maker)
    if shared_weights.digest(state["weights"].reshape(-1).view(np.uint8)) != digest:
        raise ArtifactError("the weights in this pickled GPU model do not match their sha256: the pickle is damaged")
    return cls(**state)

