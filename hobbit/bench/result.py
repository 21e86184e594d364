"""What one benchmark of a model measures: its latency statistics (Timing) and everything
recorded for one model, thread count and load condition (BenchResult), with the tolerances
that decide whether hobbit's outputs agree with onnxruntime's.

Its own module so that the suite that fills results (hobbit.bench.suite), the reports that
read them (hobbit.bench.report) and the other benchmarks (TensorFlow, int8/bf16) share one
record without importing each other."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hobbit.bench import sporadic
from hobbit.bench.load import NO_SPIN_ENGINE, describe_mode
from hobbit.bench.memory import MemoryUse

RTOL = 1e-3
# Absolute, for an output whose values are at most 1; scaled by the largest magnitude of a
# larger one: an element computed as the difference of large terms (a box corner near 0,
# from a centre and a half-width of hundreds of pixels) carries their rounding, not its
# own (measured: 7e-4 px on one corner of RetinaNet's 9,216 P4 boxes, 20 ulps of 300).
ATOL = 1e-4
OPENVINO_ENGINE = "openvino"
# How the reports name each engine that result fields hold.
ENGINE_LABELS = {"hobbit": "hobbit", "aot": "hobbit AOT library", "onnxruntime": "onnxruntime",
                 NO_SPIN_ENGINE: "onnxruntime allow_spinning=0", OPENVINO_ENGINE: "OpenVINO f32"}
TOLERANCE = f"rtol {RTOL}, atol {ATOL} times an output's largest magnitude where that is above 1"


@dataclass(frozen=True)
class Timing:
    """Latency statistics over the timed runs, in milliseconds."""

    median: float
    p10: float
    p90: float
    p99: float | None = None  # with `tail` (the poisson condition's requests)

    @classmethod
    def of(cls, seconds: list[float], tail: bool = False) -> Timing:
        ms = np.asarray(seconds) * 1e3
        return cls(float(np.median(ms)), float(np.percentile(ms, 10)), float(np.percentile(ms, 90)),
                   float(np.percentile(ms, 99)) if tail else None)

    def __str__(self) -> str:
        return (f"median {self.median:9.3f} ms   p10-p90 {self.p10:.3f}-{self.p90:.3f} ms"
                + (f"   p99 {self.p99:.3f} ms" if self.p99 is not None else ""))


@dataclass
class BenchResult:
    model: str
    runs: int
    threads: int
    compile_seconds: float
    max_abs_error: float
    mismatch: str | None  # why the outputs disagree, or None when they agree
    hobbit: Timing | None = None
    onnxruntime: Timing | None = None
    flops: int = 0  # work of one inference on hobbit's compiled graph, Winograd convs counted as direct
    peak_gflops: float | None = None  # measured FMA peak at this thread count (its best trial)
    inputs: str = ""  # e.g. "input: float32[1x3x224x224]"
    mode: str = "none"  # one of MODES: the load condition, or "streams"
    batch: int = 1
    streams: int = 1  # inferences in flight at once: 2 for two-procs, S for streams
    hobbit_ips: float | None = None  # inferences per second (batch items, all streams together)
    onnxruntime_ips: float | None = None
    memory: dict[str, MemoryUse] | None = None  # per engine, each in a fresh process (hobbit.bench.memory)
    aot: Timing | None = None  # the exported library through hobbit.load (hobbit.bench.aot), when benchmarked
    aot_ips: float | None = None
    aot_max_abs_diff: float | None = None  # |library - JIT|, at most hobbit.bench.aot.PARITY_ATOL
    aot_export_seconds: float | None = None  # export plus hobbit.load
    ctypes_call_us: float | None = None  # one call into the library through ctypes that does no work
    # onnxruntime with session.intra_op.allow_spinning=0 (hobbit.bench.ort.NO_SPIN), timed in the same
    # rounds where a load table reports it
    onnxruntime_nospin: Timing | None = None
    onnxruntime_nospin_ips: float | None = None
    executed_flops: int | None = None  # the arithmetic hobbit's kernels execute (None: the same as flops)
    # OpenVINO fp32 (hobbit.bench.openvino), timed in the plain condition where it is installed; when it
    # is not timed, why (not installed, outputs disagree, it failed), else None
    openvino: Timing | None = None
    openvino_note: str | None = None
    openvino_max_abs_error: float | None = None
    # Sporadic conditions (hobbit.bench.sporadic): per engine (ENGINES' keys), the process's CPU seconds
    # per second of idle, and the back-to-back median (ms) of the plain condition of the same run
    idle_cpu: dict[str, float | None] | None = None
    back_to_back: dict[str, float] | None = None
    idle_floor: float | None = None  # the same gaps with no engine: the benchmark's own sleeps (sporadic.FLOOR)

    def timings(self) -> dict[str, Timing]:
        """Every engine timed in this result, by engine name (hobbit.bench.load's engine keys)."""
        found = {"hobbit": self.hobbit, "aot": self.aot, "onnxruntime": self.onnxruntime,
                 NO_SPIN_ENGINE: self.onnxruntime_nospin, OPENVINO_ENGINE: self.openvino}
        return {name: t for name, t in found.items() if t is not None}

    @property
    def best_peer(self) -> str | None:
        """The faster (median) of onnxruntime (default session) and OpenVINO, where timed."""
        peers = {name: t for name, t in self.timings().items() if name in ("onnxruntime", OPENVINO_ENGINE)}
        return min(peers, key=lambda name: peers[name].median) if peers else None

    @property
    def peer_ratio(self) -> float | None:
        """hobbit median / the best peer's median (< 1 means hobbit is faster than every peer)."""
        best = self.best_peer
        return None if best is None else _ratio(self.hobbit, self.timings()[best], "median")

    def slowdown(self, engine: str) -> float | None:
        """An engine's median here over its back-to-back median (sporadic conditions): 1 when idle
        gaps cost it nothing."""
        timing = self.timings().get(engine)
        base = (self.back_to_back or {}).get(engine)
        return None if timing is None or not base else timing.median / base

    @property
    def ratio(self) -> float | None:
        """hobbit median / onnxruntime median (< 1 means hobbit is faster)."""
        return _ratio(self.hobbit, self.onnxruntime, "median")

    @property
    def p90_ratio(self) -> float | None:
        """hobbit p90 / onnxruntime p90: the slow tail, where a busy machine shows first."""
        return _ratio(self.hobbit, self.onnxruntime, "p90")

    @property
    def nospin_ratio(self) -> float | None:
        """hobbit median / the non-spinning onnxruntime session's median."""
        return _ratio(self.hobbit, self.onnxruntime_nospin, "median")

    @property
    def ips_ratio(self) -> float | None:
        """onnxruntime inferences/s / hobbit's: oriented like the latency ratios, < 1 means hobbit is faster."""
        if self.hobbit_ips is None or self.onnxruntime_ips is None:
            return None
        return self.onnxruntime_ips / self.hobbit_ips

    @property
    def aot_ratio(self) -> float | None:
        """Exported library median / JIT median (< 1 means the library is faster)."""
        return _ratio(self.aot, self.hobbit, "median")

    @property
    def aot_p90_ratio(self) -> float | None:
        """Exported library p90 / JIT p90."""
        return _ratio(self.aot, self.hobbit, "p90")

    @property
    def gflops(self) -> float | None:
        """hobbit's GFLOP/s at its median latency, Winograd convs counted as the direct convs they
        replace (comparable across conv algorithms; can pass the FMA peak)."""
        return self._at_median(self.flops)

    @property
    def executed_gflops(self) -> float | None:
        """hobbit's GFLOP/s at its median latency, of the arithmetic its kernels execute."""
        return self._at_median(self.flops if self.executed_flops is None else self.executed_flops)

    @property
    def peak_percent(self) -> float | None:
        """executed_gflops as a percentage of the measured FMA peak for the same thread count."""
        if self.executed_gflops is None or not self.peak_gflops:
            return None
        return 100.0 * self.executed_gflops / self.peak_gflops

    def _at_median(self, flops: int) -> float | None:
        """GFLOP/s of `flops` per inference at hobbit's median latency."""
        if self.hobbit is None:
            return None
        return flops / (self.hobbit.median * 1e-3) / 1e9

    def format(self) -> str:
        lines = [f"model: {self.model}   threads: {self.threads}   timed runs: {self.runs} each"
                 + (f"   batch: {self.batch}" if self.batch > 1 else ""),
                 f"compile: {self.compile_seconds:.2f} s",
                 f"max |hobbit - onnxruntime|: {self.max_abs_error:.3g}"]
        if self.memory is not None:
            lines += [f"memory, {engine} in a fresh process: {_describe_memory(use)}"
                      for engine, use in self.memory.items()]
        if self.mode != "none":
            lines.insert(1, f"load: {self.mode} ({describe_mode(self.mode, self.streams)})")
        if self.mismatch is not None:
            lines.append(f"OUTPUTS DISAGREE ({TOLERANCE}): {self.mismatch}")
            lines.append("no speed ratio is reported for a model hobbit computes wrongly")
            return "\n".join(lines)
        lines += [f"hobbit:      {self.hobbit}", f"onnxruntime: {self.onnxruntime}",
                  f"ratio hobbit/onnxruntime (median): {self.ratio:.3f}   (p90): {self.p90_ratio:.3f}"]
        if self.onnxruntime_nospin is not None:
            lines += [f"onnxruntime, allow_spinning=0: {self.onnxruntime_nospin}   "
                      f"ratio hobbit/it (median): {self.nospin_ratio:.3f}"]
        if self.openvino is not None:
            lines += [f"OpenVINO f32:  {self.openvino}   ratio hobbit/it (median): "
                      f"{_ratio(self.hobbit, self.openvino, 'median'):.3f}   max |OpenVINO - onnxruntime|: "
                      f"{self.openvino_max_abs_error:.3g}",
                      f"ratio hobbit/best peer ({ENGINE_LABELS[self.best_peer]}, median): {self.peer_ratio:.3f}"]
        elif self.openvino_note is not None:
            lines.append(f"OpenVINO not timed: {self.openvino_note}")
        if self.back_to_back:
            lines.append("median / the same engine's back-to-back median: " + ", ".join(
                f"{ENGINE_LABELS[name]} {self.slowdown(name):.2f}" for name in self.timings()
                if self.slowdown(name) is not None))
        if self.idle_cpu:
            lines.append("idle cost, process CPU seconds per second of idle: " + ", ".join(
                f"{ENGINE_LABELS[name]} {format_cores(cores)}" for name, cores in self.idle_cpu.items())
                + f"; the sleeps alone {format_cores(self.idle_floor)}")
        if self.aot is not None:
            lines += [f"AOT library: {self.aot}",
                      f"ratio AOT/JIT (median): {self.aot_ratio:.3f}   (p90): {self.aot_p90_ratio:.3f}   "
                      f"max |AOT - JIT|: {self.aot_max_abs_diff:.3g}   export + load: {self.aot_export_seconds:.2f} s"
                      f"   no-op ctypes call: {self.ctypes_call_us:.2f} us"]
        if self.ips_ratio is not None:
            lines.append(f"inferences/s: hobbit {self.hobbit_ips:.1f}, onnxruntime {self.onnxruntime_ips:.1f}, "
                         f"ratio onnxruntime/hobbit: {self.ips_ratio:.3f}")
        if sporadic.is_sporadic(self.mode):  # GFLOP/s of a latency that includes idle wake-ups: not shown
            return "\n".join(lines)
        lines += [f"hobbit: {self.executed_gflops:.1f} GFLOP/s executed"
                  + (f" = {self.peak_percent:.0f}% of the {self.peak_gflops:.0f} GFLOP/s FMA peak"
                     if self.peak_percent is not None else "")
                  + f"; {self.flops / 1e9:.3f} GFLOP per run counting Winograd convs as direct: {self.gflops:.1f} GFLOP/s"]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Every number of the result, JSON-ready (None where no timing is reported)."""
        return {"model": self.model, "threads": self.threads, "runs": self.runs, "inputs": self.inputs,
                "mode": self.mode, "batch": self.batch, "streams": self.streams,
                "compile_seconds": self.compile_seconds,
                "max_abs_error": self.max_abs_error if math.isfinite(self.max_abs_error) else None,
                "outputs_agree": self.mismatch is None, "mismatch": self.mismatch,
                "hobbit_ms": _as_dict(self.hobbit),
                "onnxruntime_ms": _as_dict(self.onnxruntime),
                "ratio": self.ratio, "p90_ratio": self.p90_ratio, "hobbit_ips": self.hobbit_ips,
                "onnxruntime_ips": self.onnxruntime_ips, "ips_ratio": self.ips_ratio,
                "onnxruntime_nospin_ms": _as_dict(self.onnxruntime_nospin),
                "onnxruntime_nospin_ips": self.onnxruntime_nospin_ips, "nospin_ratio": self.nospin_ratio,
                "aot_ms": _as_dict(self.aot), "aot_ratio": self.aot_ratio,
                "aot_p90_ratio": self.aot_p90_ratio, "aot_ips": self.aot_ips,
                "aot_max_abs_diff": self.aot_max_abs_diff, "aot_export_seconds": self.aot_export_seconds,
                "ctypes_call_us": self.ctypes_call_us,
                "openvino_ms": _as_dict(self.openvino), "openvino_note": self.openvino_note,
                "openvino_max_abs_error": self.openvino_max_abs_error,
                "best_peer": self.best_peer, "peer_ratio": self.peer_ratio,
                "idle_cpu_per_idle_second": self.idle_cpu, "idle_floor": self.idle_floor,
                "back_to_back_ms": self.back_to_back,
                "slowdown": None if not self.back_to_back else
                {name: self.slowdown(name) for name in self.timings() if self.slowdown(name) is not None},
                "flops": self.flops, "gflops": self.gflops,
                "executed_flops": self.flops if self.executed_flops is None else self.executed_flops,
                "executed_gflops": self.executed_gflops,
                "peak_gflops": self.peak_gflops, "peak_percent": self.peak_percent,
                "memory_bytes": None if self.memory is None else
                {engine: use.to_dict() for engine, use in self.memory.items()}}


def _ratio(a: Timing | None, b: Timing | None, statistic: str) -> float | None:
    """a's statistic (median, p90) / b's, or None when either engine was not timed."""
    if a is None or b is None:
        return None
    return getattr(a, statistic) / getattr(b, statistic)


def _as_dict(timing: Timing | None) -> dict[str, float] | None:
    """median, p10, p90, and p99 where measured."""
    return None if timing is None else {k: v for k, v in asdict(timing).items() if v is not None}


def format_cores(cores: float | None) -> str:
    """An idle cost (CPU seconds per second of idle) as the reports write it."""
    return "—" if cores is None else f"{cores:.3f}"


def _describe_memory(use: MemoryUse) -> str:
    return (f"{megabytes(use.built)} MB after building, {megabytes(use.run)} MB after one run, peak {megabytes(use.peak)} MB "
            f"({megabytes(use.base)} MB after its imports)")


def megabytes(nbytes: int) -> str:
    return f"{nbytes / 1e6:.0f}"
