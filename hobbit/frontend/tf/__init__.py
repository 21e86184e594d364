"""TensorFlow and TFLite models, read by hobbit's own readers (no TensorFlow at run time).

The readers (graphdef.py, savedmodel.py, tflite.py) turn a file into a TFGraph
(graph.py): TensorFlow-vocabulary nodes with decoded attributes, functions inlined,
variables replaced by constants. The converters (convert.py, tf_ops/) turn a TFGraph
into hobbit's graph IR; TFLite's builtins are translated into that vocabulary by its
reader, so both formats share one set of converters."""
