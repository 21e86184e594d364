"""ONNX converters for pool ops (being written)."""
