"""ONNX converters for norm ops (being written)."""
