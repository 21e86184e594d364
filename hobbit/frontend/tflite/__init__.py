"""TFLite flatbuffers, read without TensorFlow.

The reader (reader.py) decodes the file (flatbuffer.py, schema.py, model.py) and translates
each builtin into TensorFlow ops (ops/, a module per op family; emit.py), producing the
TFGraph the TensorFlow frontend (hobbit.frontend.tf) imports: TFLite is a reader on top of
the TensorFlow converters, not a second set of them."""
