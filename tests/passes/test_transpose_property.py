"""Property tests of sink-transposes (hypothesis): random graphs of Transposes (some undoing
earlier ones, so regions cancel), element-wise ops (unary, binary with broadcasting against
constants, other tensors and a second input), Concat (with constants, broadcast tokens and
other tensors: ViT's class token is one), Reshape, Pad, Slice, Split, reductions and Softmax
over random ranks, perms and axes.

Each graph is checked twice against onnxruntime: the graph after the pass alone, evaluated
with the op registry's numpy references (a wrong rewrite, not a kernel, is what fails there),
and the model compiled by hobbit with its whole pipeline. The pass must also never add
Transposes or the elements they copy. Tolerances: rtol 1e-4, atol 1e-5 (float32 sums and
softmaxes of at most a few hundred terms, summed in another order).

Examples are derandomized so CI sees the same graphs on every run, and bounded in number
and size (ranks 1 to 5, dims 1 to 4) so the file runs in about a minute on one core."""

from __future__ import annotations

import numpy as np
import onnx
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from onnx import helper

import hobbit
from hobbit.frontend.onnx import import_onnx
from hobbit.passes.perms import compose, inverse
from hobbit.passes.transpose import sink_transposes, transpose_cost
from tests.helpers import make_model, run_ort
from tests.passes import evaluate

RTOL, ATOL = 1e-4, 1e-5
MAX_SIZE = 256  # elements of any tensor, so a Pad or a Concat never grows a large one

_SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_UNARY = ("Relu", "Sigmoid", "Tanh", "Neg", "Abs")
_BINARY = ("Add", "Sub", "Mul", "Max")
_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax")
# Transposes weigh most: the pass only acts where they are.
_STEPS = ("transpose", "transpose", "untranspose", "untranspose", "unary", "binary", "binary", "concat", "concat",
          "class_token", "reshape", "pad", "slice", "split", "reduce", "softmax")


class _Builder:
    """Grows a graph one drawn op at a time. Every tensor is float32 with a known shape and
    a known layout: the perm p with tensor == transpose(t, p) for the last tensor t of its
    rank that no Transpose produced, so an "untranspose" step can undo the chain."""

    def __init__(self, draw, shape: tuple[int, ...]):
        self.draw = draw
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.feeds: dict[str, np.ndarray] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.layouts: dict[str, tuple[int, ...]] = {}
        self.rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
        self.feed("x", shape)

    def feed(self, name: str, shape: tuple[int, ...]) -> str:
        self.feeds[name] = self.rng.standard_normal(shape).astype(np.float32)
        self.shapes[name], self.layouts[name] = shape, tuple(range(len(shape)))
        return name

    def const(self, shape: tuple[int, ...]) -> str:
        name = f"c{len(self.inits)}"
        self.inits[name] = self.rng.standard_normal(shape).astype(np.float32)
        return name

    def ints(self, values: list[int]) -> str:
        name = f"c{len(self.inits)}"
        self.inits[name] = np.array(values, np.int64)
        return name

    def add(self, op: str, inputs: list[str], shapes: list[tuple[int, ...]], layout: tuple[int, ...] | None,
            **attrs) -> list[str]:
        outs = [f"t{len(self.nodes)}_{i}" for i in range(len(shapes))]
        self.nodes.append(helper.make_node(op, inputs, outs, name=f"{op.lower()}{len(self.nodes)}", **attrs))
        for out, shape in zip(outs, shapes):
            self.shapes[out] = shape
            self.layouts[out] = layout if layout is not None else tuple(range(len(shape)))
        return outs

    def step(self) -> None:
        recent = [o for n in self.nodes[-3:] for o in n.output] or ["x"]
        src = self.draw(st.sampled_from(recent))
        getattr(self, "_" + self.draw(st.sampled_from(_STEPS)))(src, self.shapes[src])

    def _broadcast_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A trailing part of `shape` with some dims set to 1: broadcasts to `shape`."""
        rank = self.draw(st.integers(0, len(shape)))
        tail = shape[len(shape) - rank:]
        return tuple(1 if self.draw(st.booleans()) else d for d in tail)

    def _transpose(self, src: str, shape: tuple[int, ...]) -> None:
        perm = tuple(self.draw(st.permutations(range(len(shape)))))
        self.add("Transpose", [src], [tuple(shape[p] for p in perm)], compose(self.layouts[src], perm),
                 perm=list(perm))

    def _untranspose(self, src: str, shape: tuple[int, ...]) -> None:
        back = inverse(self.layouts[src])
        self.add("Transpose", [src], [tuple(shape[p] for p in back)], None, perm=list(back))

    def _unary(self, src: str, shape: tuple[int, ...]) -> None:
        self.add(self.draw(st.sampled_from(_UNARY)), [src], [shape], self.layouts[src])

    def _binary(self, src: str, shape: tuple[int, ...]) -> None:
        kind = self.draw(st.sampled_from(["constant", "tensor", "input"]))
        same = [v for v, s in self.shapes.items() if s == shape and v != src]
        if kind == "tensor" and same:
            other = self.draw(st.sampled_from(same))
        elif kind == "input":
            other = self.feed(f"x{len(self.feeds)}", self._broadcast_shape(shape))
        else:
            other = self.const(self._broadcast_shape(shape))
        operands = [other, src] if self.draw(st.booleans()) else [src, other]
        self.add(self.draw(st.sampled_from(_BINARY)), operands, [shape], self.layouts[src])

    def _concat(self, src: str, shape: tuple[int, ...]) -> None:
        """With a constant, a constant token broadcast by Expand (ViT's class token: [1, 1, C]
        expanded to the batch), or another tensor of fitting shape."""
        axis = self.draw(st.integers(0, len(shape) - 1))
        kind = self.draw(st.sampled_from(["constant", "token", "tensor"]))
        piece = shape[:axis] + (self.draw(st.integers(1, 3)),) + shape[axis + 1:]
        fitting = [v for v, s in self.shapes.items()
                   if len(s) == len(shape) and all(a == b for d, (a, b) in enumerate(zip(s, shape)) if d != axis)]
        if kind == "tensor" and fitting:
            other = self.draw(st.sampled_from(fitting))
            piece = self.shapes[other]
        elif kind == "token":
            token = tuple(1 if d != axis and self.draw(st.booleans()) else n for d, n in enumerate(piece))
            other = self.add("Expand", [self.const(token), self.ints(list(piece))], [piece], None)[0]
        else:
            other = self.const(piece)
        out = shape[:axis] + (shape[axis] + piece[axis],) + shape[axis + 1:]
        if np.prod(out) > MAX_SIZE:
            return
        operands = [other, src] if self.draw(st.booleans()) else [src, other]
        self.add("Concat", operands, [out], self.layouts[src], axis=axis)

    def _class_token(self, src: str, shape: tuple[int, ...]) -> None:
        """ViT's embedding: a constant token, one along the joined axis, put before the
        transposed patches ([1, 1, C] before [1, HW, C] after Transpose(0, 2, 1))."""
        perm = tuple(self.draw(st.permutations(range(len(shape)))))
        patches = self.add("Transpose", [src], [tuple(shape[p] for p in perm)], compose(self.layouts[src], perm),
                           perm=list(perm))[0]
        tokens = self.shapes[patches]
        axis = self.draw(st.integers(0, len(tokens) - 1))
        token = self.const(tokens[:axis] + (1,) + tokens[axis + 1:])
        out = tokens[:axis] + (tokens[axis] + 1,) + tokens[axis + 1:]
        self.add("Concat", [token, patches], [out], self.layouts[patches], axis=axis)

    def _reshape(self, src: str, shape: tuple[int, ...]) -> None:
        """Merge two neighbouring dims, split one, add a 1 or drop one: ranks stay 1 to 5."""
        kinds = (["merge"] if len(shape) > 1 else []) + (["split", "unsqueeze"] if len(shape) < 5 else [])
        kinds += ["squeeze"] if 1 in shape and len(shape) > 1 else []
        kind = self.draw(st.sampled_from(kinds))
        dims = list(shape)
        if kind == "merge":
            d = self.draw(st.integers(0, len(dims) - 2))
            dims[d:d + 2] = [dims[d] * dims[d + 1]]
        elif kind == "split":
            d = self.draw(st.integers(0, len(dims) - 1))
            factor = self.draw(st.sampled_from([f for f in (1, 2, 3, 4) if dims[d] % f == 0]))
            dims[d:d + 1] = [factor, dims[d] // factor]
        elif kind == "unsqueeze":
            dims.insert(self.draw(st.integers(0, len(dims))), 1)
        else:
            dims.pop(self.draw(st.sampled_from([d for d, n in enumerate(dims) if n == 1])))
        self.add("Reshape", [src, self.ints(dims)], [tuple(dims)], None)

    def _pad(self, src: str, shape: tuple[int, ...]) -> None:
        rank = len(shape)
        pads = [self.draw(st.integers(0, 2)) for _ in range(2 * rank)]
        out = tuple(shape[d] + pads[d] + pads[d + rank] for d in range(rank))
        if np.prod(out) > MAX_SIZE:
            return
        mode = self.draw(st.sampled_from(["constant", "reflect", "edge"]))
        if mode == "reflect" and any(pads[d] >= shape[d] or pads[d + rank] >= shape[d] for d in range(rank)):
            mode = "edge"
        self.add("Pad", [src, self.ints(pads)], [out], self.layouts[src], mode=mode)

    def _slice(self, src: str, shape: tuple[int, ...]) -> None:
        axes = sorted(self.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
        starts, ends, steps, out = [], [], [], list(shape)
        for a in axes:
            start = self.draw(st.integers(0, shape[a] - 1))
            end = self.draw(st.integers(start + 1, shape[a]))
            step = self.draw(st.integers(1, 2))
            starts.append(start), ends.append(end), steps.append(step)
            out[a] = len(range(start, end, step))
        self.add("Slice", [src, self.ints(starts), self.ints(ends), self.ints(axes), self.ints(steps)], [tuple(out)],
                 self.layouts[src])

    def _split(self, src: str, shape: tuple[int, ...]) -> None:
        axes = [d for d, n in enumerate(shape) if n > 1]
        if not axes:
            return
        axis = self.draw(st.sampled_from(axes))
        first = self.draw(st.integers(1, shape[axis] - 1))
        sizes = [first, shape[axis] - first]
        outs = [shape[:axis] + (s,) + shape[axis + 1:] for s in sizes]
        self.add("Split", [src, self.ints(sizes)], outs, self.layouts[src], axis=axis)

    def _reduce(self, src: str, shape: tuple[int, ...]) -> None:
        axes = sorted(self.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
        keepdims = self.draw(st.integers(0, 1)) if len(axes) < len(shape) else 1
        out = tuple(1 if d in axes else n for d, n in enumerate(shape) if keepdims or d not in axes)
        op = self.draw(st.sampled_from(_REDUCE))
        layout = self.layouts[src] if keepdims else None
        if op == "ReduceSum":  # axes is an input from opset 13, an attribute of the others until 18
            self.add(op, [src, self.ints(axes)], [out], layout, keepdims=keepdims)
        else:
            self.add(op, [src], [out], layout, axes=axes, keepdims=keepdims)

    def _softmax(self, src: str, shape: tuple[int, ...]) -> None:
        self.add("Softmax", [src], [shape], self.layouts[src], axis=self.draw(st.integers(0, len(shape) - 1)))


@st.composite
def transpose_graphs(draw) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model of 3 to 10 drawn steps from one input of rank 1 to 5 (dims of 1 drawn often:
    a batch of one, a class token), the last tensor an output and maybe an earlier one too
    (a region output read outside the region)."""
    shape = tuple(draw(st.lists(st.sampled_from([1, 1, 2, 3, 4]), min_size=1, max_size=5)))
    builder = _Builder(draw, shape)
    for _ in range(draw(st.integers(3, 10))):
        builder.step()
    if not builder.nodes:
        builder._unary("x", shape)
    outputs = [builder.nodes[-1].output[-1]]
    earlier = [o for n in builder.nodes[:-1] for o in n.output]
    if earlier and draw(st.booleans()):
        outputs.append(draw(st.sampled_from(earlier)))
    return make_model(builder.nodes, builder.feeds, outputs, builder.inits), builder.feeds


@_SETTINGS
@given(transpose_graphs())
def test_sink_transposes_keeps_results_and_never_adds_transposes(case) -> None:
    model, feeds = case
    note(onnx.printer.to_text(model.graph))
    expected = run_ort(model, feeds)
    graph = import_onnx(model)
    before = transpose_cost(graph)
    sunk = sink_transposes(graph)
    note(str(sunk))
    after = transpose_cost(sunk)
    assert after[0] <= before[0] and after[1] <= before[1]
    for got, want in zip(evaluate(sunk, feeds), expected):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    for got, want in zip(hobbit.compile(model).run(feeds), expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
