"""TensorFlow models (frozen GraphDef, SavedModel, Keras), read by hobbit's own readers (no
TensorFlow at run time; Keras files need it to export themselves).

The readers (graphdef.py, savedmodel.py, keras.py) turn a file into a TFGraph (graph.py):
TensorFlow-vocabulary nodes with decoded attributes, functions inlined, variables replaced
by constants. The converters (convert.py, tf_ops/) turn a TFGraph into hobbit's graph IR.
TFLite's reader (hobbit.frontend.tflite) translates its builtins into this vocabulary, so
both formats share one set of converters."""
