"""The grid emulation: a GPU model's kernels, built for the host, run over their grids.

The kernels are the GPU backend's own emitters built with the "host" flavour
(hobbit.backend.gpu.simt): the same body, its blocks run one after another and each phase's
threads in a loop, shared memory and barriers honoured. Buffers are numpy arrays laid
out as the device runtime lays out device memory: the inputs, the outputs, the weights
blob and one arena, each kernel's pointers at the places its Launch names. This is how
the GPU kernels' results are checked against onnxruntime on a machine with no GPU; its
speed says nothing about a GPU's.

A run may shuffle the order of each phase's threads (`order`, a seed) and fails with a
RaceError where two threads touched a shared element with no barrier between them
(hobbit.backend.gpu.racecheck): what the emulation says about barriers."""

from __future__ import annotations

import ctypes

import numpy as np

from hobbit.backend.gpu.launch import Launch
from hobbit.backend.gpu.racecheck import ORDER_PREFIX, RACE_RECORD, RACE_SITES, describe_race
from hobbit.backend.llvm import optimize
from hobbit.errors import RaceError
from hobbit.runtime.allocation import aligned_empty
from hobbit.runtime.jit import jit_engine
from hobbit.target import host_target


class GridEmulator:
    def __init__(self, host_module_text: str, launches: list[Launch], weights: np.ndarray, arena_bytes: int):
        target = host_target()
        self._engine = jit_engine(optimize(host_module_text, target), target)
        self._launches = launches
        self._weights = weights
        self._arena = aligned_empty(arena_bytes)
        self._arena.fill(0)
        self._calls = []
        for launch in launches:
            address = self._engine.get_function_address(f"{launch.kernel}.grid")
            kind = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(launch.args), *[ctypes.c_int64] * 3)
            self._calls.append(kind(address))
        self._record = self._global(RACE_RECORD, 6)
        self._sites = ctypes.string_at(self._engine.get_global_value_address(RACE_SITES)).decode().split("\n")
        self._orders = {n: self._global(f"{ORDER_PREFIX}{n}", n) for n in {la.threads for la in launches}}

    def _global(self, name: str, count: int) -> np.ndarray:
        """An i64 array global of the JIT-compiled module, as an int64 array over its memory."""
        address = self._engine.get_global_value_address(name)
        return np.ctypeslib.as_array((ctypes.c_int64 * count).from_address(address))

    def run(self, inputs: list[np.ndarray], outputs: list[np.ndarray], order: int | None = None) -> None:
        """Every launch in order on `inputs` (contiguous, as the model declares them), writing
        `outputs`. `order` seeds a shuffle of each phase's threads (None: in index order); a
        race raises RaceError after the run."""
        for threads, table in self._orders.items():
            shuffled = order is not None
            table[:] = np.random.default_rng([order, threads]).permutation(threads) if shuffled else np.arange(threads)
        self._record[:] = 0
        bases = {"input": [a.ctypes.data for a in inputs], "output": [a.ctypes.data for a in outputs]}
        weights, arena = self._weights.ctypes.data, self._arena.ctypes.data
        for launch, call in zip(self._launches, self._calls):
            pointers = []
            for place in launch.args:
                if place.kind in bases:
                    pointers.append(bases[place.kind][place.index] + place.offset)
                else:
                    pointers.append((weights if place.kind == "const" else arena) + place.index + place.offset)
            call(*pointers, *launch.grid)
        if self._record[0]:
            raise RaceError(describe_race(self._record, self._sites))

