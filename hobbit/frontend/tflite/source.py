"""A TFLite flatbuffer (a path or bytes) as a Source (hobbit.frontend.common.source): the
TensorFlow source with TFLite's reader, whose TFGraph the TensorFlow converters import."""

from __future__ import annotations

from dataclasses import dataclass

from hobbit.frontend.tf.graph import TFGraph
from hobbit.frontend.tf.source import TFSource
from hobbit.frontend.tflite.reader import read_tflite


@dataclass
class TFLiteSource(TFSource):
    """A TFLite model (it has no signatures: `signature` is refused when given)."""

    format: str = "tflite"

    def _read_format(self, signature: str) -> TFGraph:
        return read_tflite(self.model)
