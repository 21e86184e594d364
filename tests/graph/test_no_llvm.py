"""Importing the ground floor, the graph layer with the op definitions, the plan floor
and the graph passes, and running constant folding (the op definitions' numpy
references), does not import llvmlite (DESIGN.md: nothing in the graph layer knows
about LLVM), so a tool that reads or rewrites graphs does not pay for LLVM. Checked in
a fresh interpreter: this test process has long imported everything."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import numpy as np
import hobbit.target, hobbit.plan.arena, hobbit.plan.conv, hobbit.plan.gemm, hobbit.plan.winograd, hobbit.plan.planners
import hobbit.passes
import hobbit.ops
from hobbit.graph import shapes
from hobbit.ops import per_sample, registry, separable
from hobbit.passes.fold import fold_constants
from hobbit.graph.ir import Graph, Node, TensorType, Value
from hobbit.graph.rewrite import replace_uses

x = Value("x", TensorType(np.dtype(np.float32), (2, 3)))
y = Value("y", TensorType(np.dtype(np.float32), (2, 3)))
graph = Graph("g", [x], [y], [Node("Relu", "relu", [x], [y])])
replace_uses(graph, y, Value("z", const=np.zeros((2, 3), np.float32)))
c = Value("c", const=np.array([-1.0, 2.0], np.float32))
r = Value("r", TensorType(np.dtype(np.float32), (2,)))
folded = fold_constants(Graph("f", [], [r], [Node("Relu", "relu", [c], [r])]))
assert not folded.nodes and folded.outputs[0].const.tolist() == [0.0, 2.0], folded
print(" ".join(sorted(m for m in sys.modules if m.partition(".")[0] in ("llvmlite", "hobbit"))))
"""


def test_graph_layer_does_not_import_llvmlite():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.split()
    assert "hobbit.graph.ir" in loaded and "hobbit.passes.fold" in loaded
    assert not [m for m in loaded if m.startswith("llvmlite")], f"llvmlite imported; hobbit modules loaded: {loaded}"
