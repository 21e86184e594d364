"""ONNX converters for reduce ops (being written)."""
