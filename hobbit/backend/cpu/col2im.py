"""Col2Im: sum column blocks back into an image (the adjoint of im2col).

The input is [N*C, K, L]: K = prod(block) offsets within a block, L = prod(blocks)
sliding positions. Block offset k and position l land on image coordinate
l * stride - pad_begin + k * dilation in each spatial dim. The block offsets are
unrolled at compile time, and for each one the positions whose coordinate falls
inside the image form a static box, so every loop is affine and in bounds by
construction. Contributions are added in block-offset order, as onnxruntime does."""

from __future__ import annotations

import itertools

import numpy as np
from llvmlite import ir

from hobbit.graph.shapes import contiguous_strides
from hobbit.emit.builder import KernelBuilder
from hobbit.backend.cpu.copy import emit_fill
from hobbit.emit.half import compute_dtype, narrow, widen
from hobbit.backend.cpu.index import loop_nest, share
from hobbit.backend.cpu.parallel import Threads
from hobbit.emit.scalar import Emit
from hobbit.backend.cpu.args import CPU, KernelArgs
from hobbit.ops.col2im import Geometry, geometry


def emit_col2im(kb: KernelBuilder, x: ir.Value, dst: ir.Value, dtype: np.dtype, planes: int, g: Geometry,
                threads: Threads | None = None) -> None:
    image_size = int(np.prod(g.image, dtype=np.int64))
    count = int(np.prod(g.block, dtype=np.int64))
    length = int(np.prod(g.blocks, dtype=np.int64))
    if planes * image_size == 0:
        return
    e = Emit(kb, compute_dtype(dtype), 1)
    b = kb.b
    image_strides, block_strides = contiguous_strides(g.image), contiguous_strides(g.blocks)
    lo, hi = share(threads, planes, planes * count * length)
    with kb.loop(lo, hi, name="plane") as p:
        out_base = kb.mul(p, image_size)
        emit_fill(kb, dst, dtype, 0, image_size, 0, out_base)
        for flat, offsets in enumerate(itertools.product(*(range(n) for n in g.block))):
            boxes = [g.valid(d, k) for d, k in enumerate(offsets)]
            shape = tuple(len(r) for r in boxes)
            in_base = kb.mul(kb.add(kb.mul(p, count), flat), length)

            def add(index: list[ir.Value], offsets=offsets, boxes=boxes, in_base=in_base) -> None:
                src, at = in_base, out_base
                for d, (i, box) in enumerate(zip(index, boxes)):
                    position = kb.add(i, box.start)
                    src = kb.add(src, kb.mul(position, block_strides[d]))
                    coordinate = box.start * g.strides[d] + offsets[d] * g.dilations[d] - g.pads_begin[d]
                    at = kb.add(at, kb.mul(kb.add(kb.mul(i, g.strides[d]), coordinate), image_strides[d]))
                total = e.add(widen(b, kb.load(dst, dtype, at), dtype), widen(b, kb.load(x, dtype, src), dtype))
                kb.store(narrow(b, total, dtype), dst, dtype, at)

            loop_nest(kb, shape, add, name=f"k{flat}_")


def _lower(k: KernelArgs) -> None:
    x, out = k.node.inputs[0], k.node.outputs[0]
    emit_col2im(k.kb, k.inputs[0], k.outputs[0], x.dtype, out.shape[0] * out.shape[1], geometry(k.node.attrs),
                k.threads)


CPU.register("Col2Im", lower=_lower)
