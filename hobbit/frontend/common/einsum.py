"""Einsum as existing graph ops, for ONNX's Einsum and TensorFlow's (their equations are
the same: single-letter labels, '...', optional '->'): diagonals (Transpose, Reshape, strided Slice), sums over
labels nothing else needs (ReduceSum), then pairwise contraction of operands left to
right as one batched MatMul each (Transpose + Reshape around it), and a final Transpose
into the output's label order.

Labels are single letters; the dims an ellipsis stands for get the labels "0", "1", ...
aligned from the right, so operands with different ellipsis ranks broadcast as numpy does.
Integer operands stay integers; float16/bfloat16 ones are computed in float32."""

from __future__ import annotations

from collections import Counter

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.half import narrow, widen


class Term:
    """A value with one label per dim."""

    def __init__(self, value, labels: list[str]):
        self.value = value
        self.labels = labels

    def size(self, label: str) -> int:
        return self.value.shape[self.labels.index(label)]


def parse(equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels and the output's labels, ellipses expanded."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"Einsum equation {equation!r} names {len(terms)} operands, the node has {len(ranks)}")
    ellipsis_rank = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, rank - len(term.replace("...", "")))
    operands = [_expand(term, rank, ellipsis_rank, equation) for term, rank in zip(terms, ranks)]
    if arrow:
        output = _expand(rhs, ellipsis_rank + len(rhs.replace("...", "")), ellipsis_rank, equation)
    else:
        counts = Counter(label for term in operands for label in term)
        broadcast = [str(i) for i in range(ellipsis_rank)]
        output = broadcast + sorted(label for label, n in counts.items() if n == 1 and label.isalpha())
    known = {label for term in operands for label in term}
    if any(label not in known for label in output) or len(set(output)) != len(output):
        raise Unsupported(f"Einsum output of {equation!r} repeats a label or names one no operand has")
    return operands, output


def _expand(term: str, rank: int, ellipsis_rank: int, equation: str) -> list[str]:
    head, dots, tail = term.partition("...")
    letters = head + tail
    if not all(ch.isalpha() for ch in letters) or "..." in tail:
        raise Unsupported(f"Einsum equation {equation!r} is malformed")
    extra = rank - len(letters)
    if extra < 0 or (extra and not dots):
        raise Unsupported(f"Einsum term {term!r} does not match an operand of rank {rank}")
    broadcast = [str(ellipsis_rank - extra + i) for i in range(extra)]  # aligned from the right
    return list(head) + broadcast + list(tail)


def _transpose(ctx, term: Term, order: list[str]) -> Term:
    perm = tuple(term.labels.index(label) for label in order)
    if perm == tuple(range(len(perm))):
        return Term(term.value, list(order))
    return Term(ctx.emit1("Transpose", [term.value], {"perm": perm}), list(order))


def _reshape(ctx, value, shape: tuple[int, ...]):
    if tuple(value.shape) == tuple(shape):
        return value
    return ctx.emit1("Reshape", [value], {"shape": tuple(shape)})


def _diagonals(ctx, term: Term) -> Term:
    """x[..., i, ..., i, ...] -> x[..., i, ...] for every label repeated within the term:
    the two dims moved last, merged, and sliced with stride size + 1."""
    while True:
        repeated = [label for label, n in Counter(term.labels).items() if n > 1]
        if not repeated:
            return term
        label = repeated[0]
        first = term.labels.index(label)
        second = term.labels.index(label, first + 1)
        size = term.value.shape[first]
        if term.value.shape[second] != size:
            raise Unsupported(f"Einsum diagonal of label {label!r} over dims of different sizes")
        keep = [k for k in range(len(term.labels)) if k not in (first, second)]
        moved = ctx.emit1("Transpose", [term.value], {"perm": tuple(keep) + (first, second)})
        outer = tuple(moved.shape[:-2])
        flat = _reshape(ctx, moved, outer + (size * size,))
        rank = len(outer)
        diag = ctx.emit1("Slice", [flat], {"starts": (0,) * (rank + 1), "steps": (1,) * rank + (size + 1,),
                                           "sizes": outer + (size,)})
        term = Term(diag, [term.labels[k] for k in keep] + [label])


def _sum_out(ctx, term: Term, needed: set[str]) -> Term:
    axes = tuple(k for k, label in enumerate(term.labels) if label not in needed)
    if not axes:
        return term
    value = ctx.emit1("ReduceSum", [term.value], {"axes": axes, "keepdims": 0})
    return Term(value, [label for label in term.labels if label in needed])


def _contract(ctx, a: Term, b: Term, needed: set[str]) -> Term:
    """One batched MatMul: [batch, a-only, summed] x [batch, summed, b-only]."""
    shared = [label for label in a.labels if label in b.labels]
    batch = [label for label in shared if label in needed]
    summed = [label for label in shared if label not in needed]
    for label in summed:  # a broadcast (size-1) dim against a full one: sum the full one first
        if a.size(label) != b.size(label):
            big = a if a.size(label) > b.size(label) else b
            axis = big.labels.index(label)
            reduced = Term(ctx.emit1("ReduceSum", [big.value], {"axes": (axis,), "keepdims": 1}), big.labels)
            a, b = (reduced, b) if big is a else (a, reduced)
    a_only = [label for label in a.labels if label not in shared]
    b_only = [label for label in b.labels if label not in shared]
    a = _transpose(ctx, a, batch + a_only + summed)
    b = _transpose(ctx, b, batch + summed + b_only)
    k = int(np.prod([a.size(label) for label in summed], dtype=np.int64))
    m = int(np.prod([a.size(label) for label in a_only], dtype=np.int64))
    n = int(np.prod([b.size(label) for label in b_only], dtype=np.int64))
    a_batch = tuple(a.size(label) for label in batch)
    b_batch = tuple(b.size(label) for label in batch)
    product = ctx.emit1("MatMul", [_reshape(ctx, a.value, a_batch + (m, k)), _reshape(ctx, b.value, b_batch + (k, n))])
    out_batch = tuple(product.shape[:-2])
    shape = out_batch + tuple(a.size(label) for label in a_only) + tuple(b.size(label) for label in b_only)
    return Term(_reshape(ctx, product, shape), batch + a_only + b_only)


def emit_einsum(ctx, equation: str, ins: list):
    """The einsum of the operands `ins` under `equation`, as graph ops; returns its value."""
    dtype = np.dtype(ins[0].dtype)
    if any(np.dtype(v.dtype) != dtype for v in ins):
        raise Unsupported("Einsum of operands with different dtypes")
    ins = [widen(ctx, "Einsum", v) if dtype.kind not in "iu" else v for v in ins]
    labels, output = parse(equation, [len(v.shape) for v in ins])
    terms = [_diagonals(ctx, Term(v, list(lab))) for v, lab in zip(ins, labels)]
    acc = None
    for index, term in enumerate(terms):
        later = {label for t in terms[index + 1:] for label in t.labels}
        needed = set(output) | later
        if acc is None:
            acc = _sum_out(ctx, term, needed)
            continue
        acc = _sum_out(ctx, acc, needed | set(term.labels))
        term = _sum_out(ctx, term, needed | set(acc.labels))
        acc = _contract(ctx, acc, term, needed)
    return narrow(ctx, _transpose(ctx, acc, output).value, dtype)
