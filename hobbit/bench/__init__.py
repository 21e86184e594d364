"""The benchmarks: hobbit timed beside its peers, in the same run, with outputs checked first.

`hobbit bench` (hobbit.cli.bench) drives them; each module is one part:

- suite: an ONNX model against onnxruntime: compile, compare outputs, time both engines in
  alternating blocks, per thread count and load condition (result: what is recorded);
- load: the load conditions (a busy core, two processes, streams, BLAS threads) and the
  alternating rounds; sporadic: requests after idle gaps (gaps:MS, poisson:RATE) and what the
  idle process burns; ort: the onnxruntime session; openvino: OpenVINO, the other peer (optional);
  memory: resident memory, each engine in a fresh process; aot: the exported library as a third engine;
- report: the markdown tables, BENCHMARKS.md's page, JSON and the chart of ratios;
- quant (and quant_report): int8 and bf16 inference, accuracy and speed, beside onnxruntime
  and OpenVINO;
- sweep: one compile of a model with symbolic dims at several sizes of one dim, beside a
  static compile of each size and onnxruntime (`hobbit bench --sweep`);
- tf: a TensorFlow model beside TensorFlow and beside hobbit on its ONNX export;
- gpu (`python -m hobbit.bench.gpu`): the CUDA backend beside PyTorch eager, whose
  interpreter of ONNX graphs is torch.

This package imports nothing itself, so importing one benchmark loads only what it needs."""
