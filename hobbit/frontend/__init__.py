"""Frontends: one package per model format, each turning a model into a Graph and nothing else.

- common/: the Source interface every format implements (source.py) and what the formats
  share: the conversion context, the bounded path, size limits, builders both ONNX and
  TensorFlow converters call;
- onnx/: ONNX models; tf/: TensorFlow GraphDefs, SavedModels and Keras files; tflite/: TFLite
  flatbuffers, read into TensorFlow's vocabulary and imported by tf/'s converters;
- formats.py: which format a model is, and its Source; supported.py: SUPPORTED_OPS.md from
  the converter tables.

Everything above the frontends (the compiler, the CLI, the runtime's compile cache,
pickling and specialisation) reaches a model through its Source."""
