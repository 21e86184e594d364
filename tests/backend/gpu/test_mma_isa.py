"""The tensor-core fragment layouts against NVIDIA's PTX ISA manual, not against hobbit.

hobbit's host emulation of mma.sync (hobbit.backend.gpu.mma._mma_emulated) gathers its
operands through the same table (MmaFormat.a/.b, C_SLOTS) the fragment loads use, so a
wrong table, consistently wrong on both sides, still multiplies correctly there and only a
GPU would notice. Here the reference is the manual, transcribed as data: chapter "Warp
Level Matrix Multiply-Accumulate Instructions", sections 9.7.14.5.7 "Matrix Fragments for
mma.m16n8k8" (.tf32: Figures 72, 75, 77) and 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16
with floating point type" (.bf16: Figures 79, 81, 83), numbered as in PTX ISA 8.5-8.7
(9.7.13.4.x in older releases, 9.7.16.5.x in 9.x; anchors warp-level-matrix-fragment-mma-1688
and -16816-float). Two checks, each a function returning its mismatches:

- `isa_mismatches`: hobbit's tables, expanded to (row, col) per lane and element, against
  the manual's, element by element for lanes 0..31.
- `provenance_mismatches`: a MatMul whose operands name their own (row, col), compiled for
  cuda:sm_90 and run in the grid emulation with the mma replaced by one that reads its
  operands where the manual says each lane's registers hold them (`ptx_mma`), so hobbit's
  fragment loads and accumulator stores meet the instruction's layout, not their own.

The mutation test swaps fragment elements in hobbit's tables and sees both checks fail."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import helper

import hobbit
import hobbit.backend.gpu.mma as mma_backend
import hobbit.plan.gpu.mma as mma_plan
from tests.helpers import make_model

# The manual's row and col formulas, one (row, col) pair per fragment element (a0, a1, ...),
# each coordinate as (coefficient of groupID, coefficient of threadID_in_group, constant),
# groupID = %laneid >> 2, threadID_in_group = %laneid % 4.
G, T, G8, T4 = (1, 0, 0), (0, 1, 0), (1, 0, 8), (0, 1, 4)
T2, T2_1, T2_8, T2_9 = (0, 2, 0), (0, 2, 1), (0, 2, 8), (0, 2, 9)
ACCUMULATORS = ((G, T2), (G, T2_1), (G8, T2), (G8, T2_1))  # c0..c3: both shapes, .f32
PTX = {
    "tf32": {  # m16n8k8 .tf32
        "k": 8,
        # row = groupID for a0, a2; groupID + 8 for a1, a3
        # col = threadID_in_group for a0, a1; threadID_in_group + 4 for a2, a3
        "a": ((G, T), (G8, T), (G, T4), (G8, T4)),
        # row = threadID_in_group for b0; threadID_in_group + 4 for b1; col = groupID
        "b": ((T, G), (T4, G)),
        "c": ACCUMULATORS,
    },
    "bf16": {  # m16n8k16 .f16/.bf16
        "k": 16,
        # row = groupID for ai, 0 <= i < 2 || 4 <= i < 6; groupID + 8 otherwise
        # col = threadID_in_group * 2 + (i & 1) for i < 4; the same + 8 for i >= 4
        "a": ((G, T2), (G, T2_1), (G8, T2), (G8, T2_1), (G, T2_8), (G, T2_9), (G8, T2_8), (G8, T2_9)),
        # row = threadID_in_group * 2 + (i & 1) for bi, i < 2; the same + 8 for i >= 2; col = groupID
        "b": ((T2, G), (T2_1, G), (T2_8, G), (T2_9, G)),
        "c": ACCUMULATORS,
    },
}


def ptx_lanes(name: str, operand: str) -> list[list[tuple[int, int]]]:
    """The manual's table: for lane 0..31 the (row, col) of each fragment element."""
    def at(coord: tuple[int, int, int], g: int, t: int) -> int:
        return coord[0] * g + coord[1] * t + coord[2]

    return [[(at(row, lane >> 2, lane % 4), at(col, lane >> 2, lane % 4)) for row, col in PTX[name][operand]]
            for lane in range(32)]


def hobbit_lanes(name: str, operand: str) -> list[list[tuple[int, int]]]:
    """hobbit's table the same way, as its fragment loads and accumulator stores read it: A's
    element i at (g + dr, step * t + dk) for a[i] = (dr, dk), B's at (step * t + b[i], g)
    (MmaFormat), c_i at (g + dr, 2t + dc) for C_SLOTS[i] = (dr, dc)."""
    f = mma_plan.FORMATS[name]
    lanes = []
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        lanes.append({"a": [(g + dr, f.step * t + dk) for dr, dk in f.a],
                      "b": [(f.step * t + dk, g) for dk in f.b],
                      "c": [(g + dr, 2 * t + dc) for dr, dc in mma_backend.C_SLOTS]}[operand])
    return lanes


def isa_mismatches(name: str) -> list[str]:
    """Every (lane, fragment element) where hobbit's layout and the manual's differ."""
    out = [] if mma_plan.FORMATS[name].k == PTX[name]["k"] else [f"{name}: K {mma_plan.FORMATS[name].k}"]
    for operand in "abc":
        ours, theirs = hobbit_lanes(name, operand), ptx_lanes(name, operand)
        for lane in range(32):
            if len(ours[lane]) != len(theirs[lane]):
                out.append(f"{name} {operand}: {len(ours[lane])} elements, the manual {len(theirs[lane])}")
                break
            out += [f"{name} lane {lane} {operand}{i}: hobbit {o}, PTX ISA {p}"
                    for i, (o, p) in enumerate(zip(ours[lane], theirs[lane])) if o != p]
    return out


@pytest.mark.parametrize("name", sorted(PTX))
def test_the_transcription_covers_each_matrix_once(name):
    """A typo in the data above would leave an element held twice or never."""
    k = PTX[name]["k"]
    for operand, (rows, cols) in {"a": (16, k), "b": (k, 8), "c": (16, 8)}.items():
        held = sorted(rc for lane in ptx_lanes(name, operand) for rc in lane)
        assert held == [(r, c) for r in range(rows) for c in range(cols)], (name, operand)


@pytest.mark.parametrize("name", sorted(PTX))
def test_fragment_tables_match_the_ptx_isa(name):
    assert isa_mismatches(name) == []


def ptx_mma(kb, t, fmt, acc, frags, tid) -> None:
    """A stand-in for _mma_emulated that is the instruction as the manual defines it: lane L's
    c_r, at the (row, col) the manual gives it, accumulates A[row, k] B[k, col] over the
    instruction's K, each operand read from the lane and element the manual says hold it.
    Fragment element i of mma tile mi is at mi * (elements per tile) + i, as hobbit
    allocates them; the lane is a constant in each of 32 branches, so every look-up is one in
    the manual's tables, made here in Python."""
    b = kb.b
    tables = {operand: ptx_lanes(fmt.name, operand) for operand in "abc"}
    where = {operand: {rc: (lane, i) for lane, row in enumerate(tables[operand]) for i, rc in enumerate(row)}
             for operand in "ab"}
    na, nb = len(tables["a"][0]), len(tables["b"][0])
    lane = b.urem(tid, kb.i64(32))
    first = b.sub(tid, lane)
    frag_a, frag_b = frags
    for this in range(32):
        with kb.if_then(b.icmp_unsigned("==", lane, kb.i64(this))):
            for mi in range(t.mt):
                for ni in range(t.nt):
                    for r, (row, col) in enumerate(tables["c"][this]):
                        q = (mi * t.nt + ni) * 4 + r
                        x = acc.load(q)
                        for kk in range(PTX[fmt.name]["k"]):
                            la, ia = where["a"][(row, kk)]
                            lb, ib = where["b"][(kk, col)]
                            a = frag_a.load_of(b.add(first, kb.i64(la)), mi * na + ia)
                            x = b.fadd(x, b.fmul(a, frag_b.load_of(b.add(first, kb.i64(lb)), ni * nb + ib)))
                        acc.store(x, q)


# 32 x 32 block tiles (sm_90) of 2 x 2 warps, two 16 x 8 mma tiles each; K: two BK = 16 stages
M, N, K = 64, 32, 32
INSTRUCTION = {"tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
               "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"}


def provenance_case(operand: str) -> tuple[np.ndarray, np.ndarray]:
    """y = a @ b with one factor one-hot, the other coding its own (row, col) as
    (row + 1) * 2**col: at most 6 significant bits, exact in bf16 (8) and TF32 (11), as are
    the sums of one nonzero product. For operand "b", a[i, p(i)] = 1 and y[i, j] = b[p(i), j]
    names the row of B that met row i; for "a", b[p(j), j] = 1 and y[i, j] = a[i, p(j)]."""
    p = (np.arange(max(M, N)) * 5 + 3) % K  # reaches every k, in no tile-aligned order
    if operand == "b":
        a = np.zeros((M, K), np.float32)
        a[np.arange(M), p[:M]] = 1
        b = ((np.arange(K)[:, None] + 1) * 2.0 ** np.arange(N)[None, :]).astype(np.float32)
    else:
        a = ((np.arange(M)[:, None] + 1) * 2.0 ** np.arange(K)[None, :]).astype(np.float32)
        b = np.zeros((K, N), np.float32)
        b[p[:N], np.arange(N)] = 1
    return a, b


def provenance_mismatches(name: str, operand: str) -> list[str]:
    """The elements of y the compiled kernel, its mma emulated as the manual says, gets wrong.
    The host module is built at emulate(), so both calls stay inside the patch; cache=False
    so that a patched table is compiled, not a cached kernel reused."""
    a, b = provenance_case(operand)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mma_backend, "_mma_emulated", ptx_mma)
        gm = hobbit.compile(model, target="cuda:sm_90", precision=name, cache=False)
        assert INSTRUCTION[name] in gm.device_code
        got = gm.emulate({"a": a})[0]
    return [f"y[{i}, {j}] = {got[i, j]:g}, expected {expected[i, j]:g}" for i, j in zip(*np.nonzero(got != expected))]


@pytest.mark.parametrize("operand", ["a", "b"])
@pytest.mark.parametrize("name", sorted(PTX))
def test_every_output_element_comes_from_the_right_operands(name, operand):
    assert provenance_mismatches(name, operand) == []


@pytest.mark.parametrize("name, field, swap", [
    ("tf32", "a", (1, 2)), ("tf32", "b", (0, 1)),
    ("bf16", "a", (1, 4)), ("bf16", "b", (1, 2)),
    ("bf16", "c", (1, 2)),
])
def test_a_swapped_fragment_fails_both_checks(name, field, swap, monkeypatch):
    """Two elements of one of hobbit's tables exchanged (a layout that still covers every
    element once, so test_mma's checks and hobbit's own emulation still pass): the table
    check names the two, and the kernel's products come out wrong for the operand whose
    layout moved (the accumulators: for either; b's provenance is checked)."""
    def swapped(slots: tuple) -> tuple:
        slots = list(slots)
        slots[swap[0]], slots[swap[1]] = slots[swap[1]], slots[swap[0]]
        return tuple(slots)

    if field == "c":
        monkeypatch.setattr(mma_backend, "C_SLOTS", swapped(mma_backend.C_SLOTS))
    else:
        fmt = mma_plan.FORMATS[name]
        monkeypatch.setitem(mma_plan.FORMATS, name, replace(fmt, **{field: swapped(getattr(fmt, field))}))
    bad = isa_mismatches(name)
    assert bad and all(f" {field}{swap[0]}:" in m or f" {field}{swap[1]}:" in m for m in bad)
    assert provenance_mismatches(name, "b" if field == "c" else field)
