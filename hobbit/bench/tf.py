"""`hobbit bench` for a TensorFlow model: hobbit on the model file, TensorFlow running the same
file (the engine a TensorFlow user has), and hobbit on the ONNX export of the same network
(tf2onnx), timed in alternating rounds in one process.

The third engine is what tells a slow TensorFlow import apart from a slow network: an NHWC
model whose transposes were not all removed, or whose decomposed BatchNorm did not fold into
its convolutions, is slower than the same network through hobbit's ONNX path.

TensorFlow fixes its thread pools the first time it runs an op, so one process benchmarks one
thread count; the TFLite interpreter takes its thread count per interpreter."""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import hobbit
from hobbit.bench.result import Timing
from hobbit.bench.suite import compare_outputs, random_inputs
from hobbit.bench.load import Engine, run_in_process
from hobbit.errors import ConfigError, MissingDependencyError, import_optional
from hobbit.frontend.formats import open_source
from hobbit.frontend.tf.source import TFSource


@dataclass
class TFBenchResult:
    model: str
    format: str
    threads: int
    runs: int
    compile_seconds: float
    max_abs_error: float  # hobbit against TensorFlow
    mismatch: str | None
    hobbit: Timing | None = None
    tensorflow: Timing | None = None
    onnx: Timing | None = None  # hobbit on the tf2onnx export; None with `onnx_missing` saying why
    onnx_missing: str | None = None
    tensorflow_threads: str = ""  # how TensorFlow's thread count was set

    @property
    def ratio(self) -> float | None:
        """hobbit on the TF model / TensorFlow (< 1: hobbit is faster)."""
        return _ratio(self.hobbit, self.tensorflow)

    @property
    def onnx_ratio(self) -> float | None:
        """hobbit on the TF model / hobbit on its ONNX export (about 1: the import loses nothing)."""
        return _ratio(self.hobbit, self.onnx)

    def format_text(self) -> str:
        lines = [f"{self.model} ({self.format}), {self.threads} thread(s), compile {self.compile_seconds:.1f} s"]
        if self.mismatch:
            return "\n".join(lines + [f"  outputs differ from TensorFlow's: {self.mismatch}"])
        lines.append(f"  hobbit (TF model)     {self.hobbit}")
        lines.append(f"  TensorFlow            {self.tensorflow}   ({self.tensorflow_threads})")
        lines.append(f"  hobbit (ONNX export)  {self.onnx}" if self.onnx else f"  hobbit (ONNX export)  -- {self.onnx_missing}")
        ratios = f"  hobbit/TensorFlow {self.ratio:.2f}"
        if self.onnx_ratio is not None:
            ratios += f", hobbit TF/ONNX {self.onnx_ratio:.2f}"
        return "\n".join(lines + [ratios + f"   (max |hobbit - TensorFlow| {self.max_abs_error:.2e})"])


def _ratio(a: Timing | None, b: Timing | None) -> float | None:
    return None if a is None or b is None else a.median / b.median


def _tensorflow():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = import_optional("tensorflow", lambda exc: MissingDependencyError(
        "benchmarking a TensorFlow model runs TensorFlow beside hobbit: pip install 'hobbit[tf]'"))
    tf.get_logger().setLevel("ERROR")  # TF1-API deprecation notices from the GraphDef engine and tf2onnx
    return tf


def _set_tf_threads(tf: Any, threads: int) -> str:
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # TensorFlow already ran an op in this process
        now = tf.config.threading.get_intra_op_parallelism_threads()
        return f"intra-op threads already fixed at {now or 'all CPUs'} in this process"
    return f"intra-op threads {threads}, inter-op 1"


@contextlib.contextmanager
def _serving_function(tf: Any, source: TFSource) -> Iterator[tuple[Callable[..., Any], Any]]:
    """The SavedModel signature a TensorFlow server would run (a Keras file is exported first,
    as hobbit reads it), and the loaded object that keeps its variables alive."""
    signature = source.signature or "serving_default"
    with tempfile.TemporaryDirectory(prefix="hobbit-bench-") as tmp:
        folder = Path(os.fspath(source.model))
        if source.format == "keras":
            import keras
            folder = Path(tmp) / "saved_model"
            with contextlib.redirect_stdout(io.StringIO()):
                keras.saving.load_model(source.model, compile=False).export(folder, format="tf_saved_model")
        elif folder.name == "saved_model.pb":
            folder = folder.parent
        loaded = tf.saved_model.load(str(folder))
        yield loaded.signatures[signature], loaded


def _frozen(tf: Any, function: Any) -> tuple[Any, list[str], list[str]]:
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    frozen = convert_variables_to_constants_v2(function)
    return (frozen.graph.as_graph_def(), [t.name for t in frozen.inputs if t.dtype != tf.resource],
            [t.name for t in frozen.outputs])


def _graphdef_session(tf: Any, path: str | os.PathLike, threads: int) -> tuple[Any, Any]:
    """A TF1 session on the frozen graph: how frozen graphs are run."""
    graph_def = tf.compat.v1.GraphDef.FromString(Path(os.fspath(path)).read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=1)
    return tf.compat.v1.Session(graph=graph, config=config), graph_def


def _onnx_export(graph_def: Any, inputs: list[str], outputs: list[str], tflite: str | None = None) -> Any:
    """The network as ONNX through tf2onnx (the converter TensorFlow users reach for)."""
    import tf2onnx
    with contextlib.redirect_stdout(io.StringIO()):
        if tflite is not None:
            proto, _ = tf2onnx.convert.from_tflite(tflite, opset=17)
        else:
            proto, _ = tf2onnx.convert.from_graph_def(graph_def, input_names=inputs, output_names=outputs, opset=17)
    return proto


def run_tf_benchmark(path: str | os.PathLike, threads: int = 1, runs: int = 30, warmup: int = 3,
                     signature: str | None = None, seed: int = 0) -> TFBenchResult:
    """Compile the TF model with hobbit, open it in TensorFlow (or the TFLite interpreter), export it
    to ONNX with tf2onnx and compile that too; check hobbit against TensorFlow and time all three."""
    source = open_source(path, signature)
    if not isinstance(source, TFSource):
        raise ConfigError(f"{path} is not a TensorFlow model")
    tf = _tensorflow()
    tf_threads = _set_tf_threads(tf, threads) if source.format != "tflite" else f"TFLite interpreter, {threads} thread(s)"
    batch_one = {d.name: tuple(1 if n is None else n for n in d.shape)  # a symbolic batch is benchmarked at 1
                 for d in source.declared_inputs() if None in d.shape}
    t0 = time.perf_counter()
    compiled = hobbit.compile(path, threads=threads, cache=False, signature=signature, input_shapes=batch_one or None)
    compile_seconds = time.perf_counter() - t0
    feeds = random_inputs(compiled.inputs, seed)
    names = [s.name for s in compiled.outputs]
    with _tensorflow_engine(tf, source, feeds, names, threads) as (tf_run, export):
        expected = tf_run()
        worst, mismatch = compare_outputs(compiled.run(feeds), expected, names)
        result = TFBenchResult(str(path), source.format, threads, runs, compile_seconds, worst, mismatch,
                               tensorflow_threads=tf_threads)
        if mismatch is not None:
            return result
        engines: dict[str, Engine] = {"hobbit": lambda: compiled.run(feeds), "tensorflow": tf_run}
        try:
            exported = hobbit.compile(export(), threads=threads, cache=False)
            export_feeds = _export_feeds(exported.inputs, feeds)
            engines["onnx"] = lambda: exported.run(export_feeds)
        except ImportError:
            result.onnx_missing = "tf2onnx is not installed (pip install tf2onnx)"
        except Exception as exc:  # tf2onnx, or hobbit on its output: reported in the table, not fatal
            result.onnx_missing = f"the ONNX export failed: {type(exc).__name__}: {str(exc)[:200]}"
        samples = run_in_process("none", engines, runs, warmup)
    result.hobbit = Timing.of(samples["hobbit"].seconds)
    result.tensorflow = Timing.of(samples["tensorflow"].seconds)
    if "onnx" in samples:
        result.onnx = Timing.of(samples["onnx"].seconds)
    return result


def _export_feeds(specs: list[Any], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The feeds under the export's input names: tf2onnx names an input after its tensor
    ("image:0" for "image"); inputs it renamed otherwise are matched by position."""
    ours = list(feeds)
    return {spec.name: feeds[spec.name.rsplit(":", 1)[0]] if spec.name.rsplit(":", 1)[0] in feeds else feeds[ours[i]]
            for i, spec in enumerate(specs)}


@contextlib.contextmanager
def _tensorflow_engine(tf: Any, source: TFSource, feeds: dict[str, np.ndarray], names: list[str], threads: int
                       ) -> Iterator[tuple[Engine, Callable[[], Any]]]:
    """TensorFlow's run of the model on `feeds` (outputs in hobbit's order) and a function
    returning the ONNX export of the same network."""
    if source.format == "tflite":
        interpreter = tf.lite.Interpreter(model_path=os.fspath(source.model), num_threads=threads)
        interpreter.allocate_tensors()
        signatures = list(interpreter.get_signature_list())
        if signatures:  # hobbit names the inputs and outputs after the signature then (tflite.py)
            key = "serving_default" if "serving_default" in signatures else signatures[0]
            runner = interpreter.get_signature_runner(key)

            def run_tflite() -> list[np.ndarray]:
                results = runner(**feeds)
                return [results[name] for name in names]
        else:
            ins = {d["name"]: d["index"] for d in interpreter.get_input_details()}
            outs = {d["name"]: d["index"] for d in interpreter.get_output_details()}

            def run_tflite() -> list[np.ndarray]:
                for name, array in feeds.items():
                    interpreter.set_tensor(ins[name], array)
                interpreter.invoke()
                return [interpreter.get_tensor(outs[name]) for name in names]

        yield run_tflite, lambda: _onnx_export(None, [], [], tflite=os.fspath(source.model))
        return
    if source.format == "graphdef":
        graph = source.tf_graph()
        inputs = [t.name for t in graph.inputs]
        outputs = [f"{t.ref.node}:{t.ref.index}" for t in graph.outputs]
        session, graph_def = _graphdef_session(tf, source.model, threads)
        fetches = dict(zip(names, outputs))
        feed = {f"{name}:0": feeds[name] for name in inputs}
        with session:
            yield (lambda: session.run([fetches[name] for name in names], feed),
                   lambda: _onnx_export(graph_def, list(feed), outputs))
        return
    with _serving_function(tf, source) as (function, _loaded):
        kwargs = {name: tf.constant(array) for name, array in feeds.items()}

        def run_signature() -> list[np.ndarray]:
            results = function(**kwargs)
            return [results[name].numpy() for name in names]

        def export() -> Any:
            graph_def, inputs, outputs = _frozen(tf, function)
            return _onnx_export(graph_def, inputs, outputs)

        yield run_signature, export


def markdown_table(results: list[TFBenchResult]) -> str:
    lines = ["| model | format | threads | hobbit (TF model) ms | TensorFlow ms | hobbit (ONNX export) ms "
             "| hobbit / TensorFlow | hobbit TF / ONNX |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.mismatch:
            lines.append(f"| {r.model} | {r.format} | {r.threads} | outputs differ: {r.mismatch} | | | | |")
            continue
        onnx = _cell(r.onnx) if r.onnx else (r.onnx_missing or "")
        onnx_ratio = f"{r.onnx_ratio:.2f}" if r.onnx_ratio is not None else ""
        lines.append(f"| {r.model} | {r.format} | {r.threads} | {_cell(r.hobbit)} | {_cell(r.tensorflow)} "
                     f"| {onnx} | {r.ratio:.2f} | {onnx_ratio} |")
    return "\n".join(lines) + "\n"


def _cell(t: Timing) -> str:
    return f"{t.median:.2f} ({t.p10:.2f}-{t.p90:.2f})"
