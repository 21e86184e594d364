"""The TensorFlow converter table: op name -> the function that turns one TFNode into
graph ops.

A converter is called as fn(ctx, node, ins) with the importer's ConvertContext, the
TFNode and its data inputs as Values; it returns one Value per output of the node (None
for an output it does not compute, such as FusedBatchNorm's batch statistics). TFLite
readers name the builtins they cannot translate "TFLite:<NAME>"; those have no
converter and are reported under the "tflite" domain. The converters (tf_ops/) register
themselves when imported; the importer (convert.py) imports them, so this table imports
nothing above it."""

from __future__ import annotations

from typing import Callable

Converter = Callable[..., list]

_TABLE: dict[str, Converter] = {}


def tf_converter(*op_names: str) -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of every op in `op_names`."""
    def register(fn: Converter) -> Converter:
        for name in op_names:
            if name in _TABLE:
                raise ValueError(f"TensorFlow converter for {name} registered twice")
            _TABLE[name] = fn
        return fn
    return register


def lookup(op: str) -> Converter | None:
    return _TABLE.get(op)


def supported_ops() -> list[str]:
    return sorted(_TABLE)
