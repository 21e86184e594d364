"""The standard ONNX backend interface (onnx.backend.base), like onnxruntime.backend.

It lets `onnx.backend.test.BackendTest` and any tool written against that API
drive hobbit: `prepare` compiles once, the returned rep runs many times.
Inputs may be a list in graph-input order (initializers excluded), a dict, or
a single array; outputs come back as a namedtupledict in graph-output order."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

from hobbit.compiler import compile as hobbit_compile
from hobbit.errors import InputError
from hobbit.runtime.jit import CompiledModel


class HobbitRep(BackendRep):
    """A compiled model behind the BackendRep interface."""

    def __init__(self, model: CompiledModel):
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        feeds = self._feeds(inputs)
        outputs = self.model.run(feeds)
        return namedtupledict("Outputs", self.model.output_names)(*outputs)

    def _feeds(self, inputs: Any) -> dict[str, Any]:
        names = [spec.name for spec in self.model.inputs]
        if isinstance(inputs, dict):
            return {k: _as_input(v) for k, v in inputs.items()}
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(names):
            raise InputError(f"model takes {len(names)} input(s) ({', '.join(names)}), got {len(inputs)}")
        return {name: _as_input(value) for name, value in zip(names, inputs)}


def _as_input(value: Any) -> Any:
    """Arrays as arrays; a list (an ONNX sequence) as a list of arrays."""
    if isinstance(value, list):
        return [np.asarray(v) for v in value]
    return np.asarray(value)


class HobbitBackend(Backend):
    """hobbit as an ONNX backend. Only the CPU device exists."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto | str | bytes, device: str = "CPU", **kwargs: Any) -> HobbitRep:
        cls._check_device(device)
        options = {"threads": 1, "cache": False, **kwargs}
        return HobbitRep(hobbit_compile(model, **options))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[Any, ...]:
        """Wrap one node in a graph whose inputs are typed from the given arrays, then run it."""
        arrays = [np.asarray(a) for a in (inputs.values() if isinstance(inputs, dict) else inputs)]
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        graph_inputs = [onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype),
                                                           a.shape)
                        for name, a in zip([n for n in node.input if n], arrays)]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in node.output if name]
        graph = onnx.helper.make_graph([node], f"{node.op_type}_node", graph_inputs, graph_outputs)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"

    @classmethod
    def _check_device(cls, device: str) -> None:
        if not cls.supports_device(device):
            raise InputError(f"hobbit's ONNX backend runs on device 'CPU', not {device!r}")


prepare = HobbitBackend.prepare
run_model = HobbitBackend.run_model
run_node = HobbitBackend.run_node
supports_device = HobbitBackend.supports_device
