"""Baidu DeepBench's inference kernel shapes, as plain data, so hobbit can benchmark the same
GEMM, convolution and RNN problems DeepBench publishes numbers for.

Transcribed (once, by a script, not at import time) from https://github.com/baidu-research/DeepBench
at commit da81ba7820739e2e506dc27f382d15be5479f98f (its head, August 2020), files
code/kernels/gemm_problems.h, code/kernels/conv_problems.h and code/kernels/rnn_problems.h. Each
header holds three std::vector arrays: training_set (not kept here), inference_server_set
(-> the "server" key) and inference_device_set (-> the "device" key). There are no #ifdefs; a
commented-out row (conv device, "ARM convolution seg faults with this kernel") is left out.
Rows are in DeepBench's order, duplicates kept (conv server lists 4 shapes twice, conv device
1), so the counts are DeepBench's: GEMM 75/13, conv 107/16, RNN 69/3 (server/device).

Which program runs what: the NVIDIA (and Intel) benchmarks run the server sets; DeepBench's
inference precision there is int8 x int8 -> int32 (the NVIDIA default for `inference`). The ARM
benchmarks run the device sets (GEMM in 8 bits through gemmlowp, conv in fp32). No DeepBench
program runs the RNN device set.

Fields (names below, order as each header's "Vector saves" comment):
- GEMM: m, n, k, a_t, b_t. C[m, n] = op(A) op(B), op(X) = X^T when its flag is set, so A is
  stored k x m when a_t, B stored n x k when b_t (cuBLAS, column-major). Every inference row
  has a_t = b_t = False. DeepBench's int8 NVIDIA run may pad m up to a multiple of 4; the
  shapes here are unpadded.
- Conv: w, h, c, n, k, filter_w (s), filter_h (r), pad_w, pad_h, stride_w, stride_h: input
  N x C x H x W, K filters of C x R x S. Width comes before height in every pair. Two server
  rows, (7, 7, 2048, n = 1 and 2, 512, 1x1, pad 3, stride 2), pad a 1x1 filter by 3 (output
  7x7); they are kept as written.
- RNN: DeepBench's tuple is (hidden units, batch size, timesteps, cell type); here the cell
  type comes first as `kind`, lower-cased ("vanilla", "lstm", "gru"). The header gives no
  input size; DeepBench's NVIDIA benchmark feeds a hidden-sized input and builds the cuDNN
  RNN with CUDNN_SKIP_INPUT (no input projection), one layer, unidirectional. RnnShape.flops
  counts the input projection anyway, with input size = hidden (see there).
DeepBench reports times only; every flops() here is hobbit's count.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = "https://github.com/baidu-research/DeepBench"
COMMIT = "da81ba7820739e2e506dc27f382d15be5479f98f"


@dataclass(frozen=True)
class GemmShape:
    """One GEMM problem, C[m, n] = op(A) op(B), fields in gemm_problems.h's order."""

    m: int
    n: int
    k: int
    a_t: bool
    b_t: bool

    def flops(self) -> int:
        """2*m*n*k: one multiply and one add per term."""
        return 2 * self.m * self.n * self.k


@dataclass(frozen=True)
class ConvShape:
    """One 2-D convolution problem, fields in conv_problems.h's order (width before height)."""

    w: int
    h: int
    c: int
    n: int
    k: int
    filter_w: int
    filter_h: int
    pad_w: int
    pad_h: int
    stride_w: int
    stride_h: int

    def output_hw(self) -> tuple[int, int]:
        """(oh, ow) with no dilation, as cuDNN's output-dim query gives them."""
        oh = (self.h + 2 * self.pad_h - self.filter_h) // self.stride_h + 1
        ow = (self.w + 2 * self.pad_w - self.filter_w) // self.stride_w + 1
        return oh, ow

    def flops(self) -> int:
        """2*n*k*oh*ow*c*filter_h*filter_w: direct convolution, multiply and add counted."""
        oh, ow = self.output_hw()
        return 2 * self.n * self.k * oh * ow * self.c * self.filter_h * self.filter_w


_GATES = {"vanilla": 1, "lstm": 4, "gru": 3}


@dataclass(frozen=True)
class RnnShape:
    """One single-layer RNN problem; rnn_problems.h's (hidden, batch, timesteps, type), with
    the type moved first."""

    kind: str
    hidden: int
    batch: int
    timesteps: int

    def flops(self) -> int:
        """hobbit's count over all timesteps: timesteps * gates * 2 * (input + hidden) * hidden
        * batch, gates = 1 (vanilla), 4 (lstm), 3 (gru), input = hidden. Only the gate GEMMs
        are counted (no elementwise work). DeepBench's own cuDNN run skips the input GEMM
        (CUDNN_SKIP_INPUT), so it does about half this work."""
        per_step = _GATES[self.kind] * 2 * (self.hidden + self.hidden) * self.hidden * self.batch
        return self.timesteps * per_step


GEMM: dict[str, tuple[GemmShape, ...]] = {
    "server": (
        GemmShape(5124, 700, 2048, False, False),
        GemmShape(35, 700, 2048, False, False),
        GemmShape(5124, 700, 2560, False, False),
        GemmShape(35, 700, 2560, False, False),
        GemmShape(5124, 1500, 2048, False, False),
        GemmShape(35, 1500, 2048, False, False),
        GemmShape(5124, 1500, 2560, False, False),
        GemmShape(35, 1500, 2560, False, False),
        GemmShape(7680, 1, 2560, False, False),
        GemmShape(7680, 2, 2560, False, False),
        GemmShape(7680, 4, 2560, False, False),
        GemmShape(3072, 1, 1024, False, False),
        GemmShape(3072, 2, 1024, False, False),
        GemmShape(3072, 4, 1024, False, False),
        GemmShape(512, 1, 500000, False, False),
        GemmShape(1024, 1, 500000, False, False),
        GemmShape(512, 2, 500000, False, False),
        GemmShape(1024, 2, 500000, False, False),
        GemmShape(512, 4, 500000, False, False),
        GemmShape(1024, 4, 500000, False, False),
        GemmShape(1024, 700, 512, False, False),
        GemmShape(7680, 1500, 2560, False, False),
        GemmShape(6144, 1500, 2048, False, False),
        GemmShape(4608, 1500, 1536, False, False),
        GemmShape(8448, 1500, 2816, False, False),
        GemmShape(3072, 1500, 1024, False, False),
        GemmShape(7680, 3000, 2560, False, False),
        GemmShape(6144, 3000, 2048, False, False),
        GemmShape(4608, 3000, 1536, False, False),
        GemmShape(8448, 3000, 2816, False, False),
        GemmShape(3072, 3000, 1024, False, False),
        GemmShape(7680, 6000, 2560, False, False),
        GemmShape(6144, 6000, 2048, False, False),
        GemmShape(4608, 6000, 1536, False, False),
        GemmShape(8448, 6000, 2816, False, False),
        GemmShape(3072, 6000, 1024, False, False),
        GemmShape(6144, 1, 2048, False, False),
        GemmShape(4608, 1, 1536, False, False),
        GemmShape(8448, 1, 2816, False, False),
        GemmShape(6144, 2, 2048, False, False),
        GemmShape(4608, 2, 1536, False, False),
        GemmShape(8448, 2, 2816, False, False),
        GemmShape(6144, 4, 2048, False, False),
        GemmShape(4608, 4, 1536, False, False),
        GemmShape(8448, 4, 2816, False, False),
        GemmShape(512, 1500, 2816, False, False),
        GemmShape(512, 1500, 2048, False, False),
        GemmShape(512, 1500, 2560, False, False),
        GemmShape(512, 1500, 1536, False, False),
        GemmShape(1024, 1500, 2816, False, False),
        GemmShape(1024, 1500, 2048, False, False),
        GemmShape(1024, 1500, 2560, False, False),
        GemmShape(1024, 1500, 1536, False, False),
        GemmShape(512, 1, 512, False, False),
        GemmShape(1024, 1, 512, False, False),
        GemmShape(512, 3000, 2816, False, False),
        GemmShape(512, 3000, 2048, False, False),
        GemmShape(512, 3000, 2560, False, False),
        GemmShape(512, 3000, 1536, False, False),
        GemmShape(1024, 3000, 2816, False, False),
        GemmShape(1024, 3000, 2048, False, False),
        GemmShape(1024, 3000, 2560, False, False),
        GemmShape(1024, 3000, 1536, False, False),
        GemmShape(512, 2, 512, False, False),
        GemmShape(1024, 2, 512, False, False),
        GemmShape(512, 6000, 2816, False, False),
        GemmShape(512, 6000, 2048, False, False),
        GemmShape(512, 6000, 2560, False, False),
        GemmShape(512, 6000, 1536, False, False),
        GemmShape(1024, 6000, 2816, False, False),
        GemmShape(1024, 6000, 2048, False, False),
        GemmShape(1024, 6000, 2560, False, False),
        GemmShape(1024, 6000, 1536, False, False),
        GemmShape(512, 4, 512, False, False),
        GemmShape(1024, 4, 512, False, False),
    ),
    "device": (
        GemmShape(5124, 700, 2048, False, False),
        GemmShape(35, 700, 2048, False, False),
        GemmShape(3072, 1, 1024, False, False),
        GemmShape(64, 1, 1216, False, False),
        GemmShape(3072, 1500, 1024, False, False),
        GemmShape(128, 1500, 1280, False, False),
        GemmShape(3072, 1500, 128, False, False),
        GemmShape(128, 1, 1024, False, False),
        GemmShape(3072, 1, 128, False, False),
        GemmShape(176, 1500, 1408, False, False),
        GemmShape(4224, 1500, 176, False, False),
        GemmShape(128, 1, 1408, False, False),
        GemmShape(4224, 1, 128, False, False),
    ),
}

CONV: dict[str, tuple[ConvShape, ...]] = {
    "server": (
        ConvShape(700, 161, 1, 1, 32, 20, 5, 0, 0, 2, 2),
        ConvShape(700, 161, 1, 2, 32, 20, 5, 0, 0, 2, 2),
        ConvShape(700, 161, 1, 4, 32, 20, 5, 0, 0, 2, 2),
        ConvShape(341, 79, 32, 1, 32, 10, 5, 0, 0, 2, 2),
        ConvShape(341, 79, 32, 2, 32, 10, 5, 0, 0, 2, 2),
        ConvShape(341, 79, 32, 4, 32, 10, 5, 0, 0, 2, 2),
        ConvShape(480, 48, 1, 1, 16, 3, 3, 1, 1, 1, 1),
        ConvShape(240, 24, 16, 1, 32, 3, 3, 1, 1, 1, 1),
        ConvShape(120, 12, 32, 1, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(60, 6, 64, 1, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(108, 108, 3, 1, 64, 3, 3, 1, 1, 2, 2),
        ConvShape(54, 54, 64, 1, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(27, 27, 128, 1, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(14, 14, 128, 1, 256, 3, 3, 1, 1, 1, 1),
        ConvShape(7, 7, 256, 1, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(224, 224, 3, 1, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(112, 112, 64, 1, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(56, 56, 128, 1, 256, 3, 3, 1, 1, 1, 1),
        ConvShape(28, 28, 256, 1, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(14, 14, 512, 1, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(7, 7, 512, 1, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(224, 224, 3, 2, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(112, 112, 64, 2, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(56, 56, 128, 2, 256, 3, 3, 1, 1, 1, 1),
        ConvShape(28, 28, 256, 2, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(14, 14, 512, 2, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(7, 7, 512, 2, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(224, 224, 3, 1, 64, 7, 7, 3, 3, 2, 2),
        ConvShape(28, 28, 192, 1, 32, 5, 5, 2, 2, 1, 1),
        ConvShape(28, 28, 192, 1, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 512, 1, 48, 5, 5, 2, 2, 1, 1),
        ConvShape(14, 14, 512, 1, 192, 1, 1, 0, 0, 1, 1),
        ConvShape(7, 7, 832, 1, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(7, 7, 832, 1, 128, 5, 5, 2, 2, 1, 1),
        ConvShape(224, 224, 3, 2, 64, 7, 7, 3, 3, 2, 2),
        ConvShape(28, 28, 192, 2, 32, 5, 5, 2, 2, 1, 1),
        ConvShape(28, 28, 192, 2, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 512, 2, 48, 5, 5, 2, 2, 1, 1),
        ConvShape(14, 14, 512, 2, 192, 1, 1, 0, 0, 1, 1),
        ConvShape(7, 7, 832, 2, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(7, 7, 832, 2, 128, 5, 5, 2, 2, 1, 1),
        ConvShape(56, 56, 64, 1, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(56, 56, 64, 1, 256, 1, 1, 0, 0, 2, 2),
        ConvShape(28, 28, 128, 1, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(28, 28, 128, 1, 512, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 256, 1, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 256, 1, 256, 3, 3, 1, 1, 1, 1),
        ConvShape(14, 14, 256, 1, 1024, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 512, 1, 512, 1, 1, 0, 0, 1, 1),
        ConvShape(7, 7, 2048, 1, 512, 1, 1, 3, 3, 2, 2),
        ConvShape(56, 56, 64, 2, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(56, 56, 64, 2, 256, 1, 1, 0, 0, 2, 2),
        ConvShape(28, 28, 128, 2, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(28, 28, 128, 2, 512, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 256, 2, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 256, 2, 256, 3, 3, 1, 1, 1, 1),
        ConvShape(14, 14, 256, 2, 1024, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 512, 2, 512, 1, 1, 0, 0, 1, 1),
        ConvShape(7, 7, 2048, 2, 512, 1, 1, 3, 3, 2, 2),
        ConvShape(700, 161, 1, 1, 64, 5, 5, 1, 1, 2, 2),
        ConvShape(350, 80, 64, 1, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(350, 80, 64, 1, 128, 5, 5, 1, 1, 2, 2),
        ConvShape(175, 40, 128, 1, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(175, 40, 128, 1, 256, 5, 5, 1, 1, 2, 2),
        ConvShape(84, 20, 256, 1, 256, 3, 3, 1, 1, 1, 1),
        ConvShape(84, 20, 256, 1, 512, 5, 5, 1, 1, 2, 2),
        ConvShape(42, 10, 512, 1, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(700, 161, 1, 2, 64, 5, 5, 1, 1, 2, 2),
        ConvShape(350, 80, 64, 2, 64, 3, 3, 1, 1, 1, 1),
        ConvShape(350, 80, 64, 2, 128, 5, 5, 1, 1, 2, 2),
        ConvShape(175, 40, 128, 2, 128, 3, 3, 1, 1, 1, 1),
        ConvShape(175, 40, 128, 2, 256, 5, 5, 1, 1, 2, 2),
        ConvShape(84, 20, 256, 2, 256, 3, 3, 1, 1, 1, 1),
        ConvShape(84, 20, 256, 2, 512, 5, 5, 1, 1, 2, 2),
        ConvShape(42, 10, 512, 2, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(112, 112, 64, 1, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 64, 1, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 256, 1, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 256, 1, 128, 1, 1, 0, 0, 2, 2),
        ConvShape(28, 28, 128, 1, 512, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 1, 128, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 1, 256, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 256, 1, 1024, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 1, 1024, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 1024, 1, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 256, 1, 1024, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 1024, 1, 512, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 512, 1, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(7, 7, 512, 1, 2048, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 1024, 1, 2048, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 2048, 1, 512, 1, 1, 0, 0, 1, 1),
        ConvShape(112, 112, 64, 2, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 64, 2, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 256, 2, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 256, 2, 128, 1, 1, 0, 0, 2, 2),
        ConvShape(28, 28, 128, 2, 512, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 2, 128, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 2, 256, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 256, 2, 1024, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 2, 1024, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 1024, 2, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 256, 2, 1024, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 1024, 2, 512, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 512, 2, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(7, 7, 512, 2, 2048, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 1024, 2, 2048, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 2048, 2, 512, 1, 1, 0, 0, 1, 1),
    ),
    "device": (
        ConvShape(112, 112, 64, 1, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 64, 1, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 256, 1, 64, 1, 1, 0, 0, 1, 1),
        ConvShape(56, 56, 256, 1, 128, 1, 1, 0, 0, 2, 2),
        ConvShape(28, 28, 128, 1, 512, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 1, 128, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 1, 256, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 256, 1, 1024, 1, 1, 0, 0, 1, 1),
        ConvShape(28, 28, 512, 1, 1024, 1, 1, 0, 0, 2, 2),
        ConvShape(14, 14, 1024, 1, 256, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 256, 1, 1024, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 1024, 1, 512, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 512, 1, 512, 3, 3, 1, 1, 1, 1),
        ConvShape(7, 7, 512, 1, 2048, 1, 1, 0, 0, 1, 1),
        ConvShape(14, 14, 1024, 1, 2048, 1, 1, 0, 0, 2, 2),
        ConvShape(7, 7, 2048, 1, 512, 1, 1, 0, 0, 1, 1),
    ),
}

RNN: dict[str, tuple[RnnShape, ...]] = {
    "server": (
        RnnShape("lstm", 512, 1, 25),
        RnnShape("lstm", 512, 2, 25),
        RnnShape("lstm", 512, 4, 25),
        RnnShape("lstm", 1024, 1, 25),
        RnnShape("lstm", 1024, 2, 25),
        RnnShape("lstm", 1024, 4, 25),
        RnnShape("lstm", 2048, 1, 25),
        RnnShape("lstm", 2048, 2, 25),
        RnnShape("lstm", 2048, 4, 25),
        RnnShape("lstm", 1536, 1, 50),
        RnnShape("lstm", 1536, 2, 50),
        RnnShape("lstm", 1536, 4, 50),
        RnnShape("lstm", 256, 1, 150),
        RnnShape("lstm", 256, 2, 150),
        RnnShape("lstm", 256, 4, 150),
        RnnShape("gru", 2816, 1, 1500),
        RnnShape("gru", 2816, 1, 750),
        RnnShape("gru", 2816, 1, 375),
        RnnShape("gru", 2816, 1, 187),
        RnnShape("gru", 2816, 2, 1500),
        RnnShape("gru", 2816, 2, 750),
        RnnShape("gru", 2816, 2, 375),
        RnnShape("gru", 2816, 2, 187),
        RnnShape("gru", 2816, 4, 1500),
        RnnShape("gru", 2816, 4, 750),
        RnnShape("gru", 2816, 4, 375),
        RnnShape("gru", 2816, 4, 187),
        RnnShape("gru", 2048, 1, 1500),
        RnnShape("gru", 2048, 1, 750),
        RnnShape("gru", 2048, 1, 375),
        RnnShape("gru", 2048, 1, 187),
        RnnShape("gru", 2048, 2, 1500),
        RnnShape("gru", 2048, 2, 750),
        RnnShape("gru", 2048, 2, 375),
        RnnShape("gru", 2048, 2, 187),
        RnnShape("gru", 2048, 4, 1500),
        RnnShape("gru", 2048, 4, 750),
        RnnShape("gru", 2048, 4, 375),
        RnnShape("gru", 2048, 4, 187),
        RnnShape("gru", 1536, 1, 1500),
        RnnShape("gru", 1536, 1, 750),
        RnnShape("gru", 1536, 1, 375),
        RnnShape("gru", 1536, 1, 187),
        RnnShape("gru", 1536, 2, 1500),
        RnnShape("gru", 1536, 2, 750),
        RnnShape("gru", 1536, 2, 375),
        RnnShape("gru", 1536, 2, 187),
        RnnShape("gru", 1536, 4, 1500),
        RnnShape("gru", 1536, 4, 750),
        RnnShape("gru", 1536, 4, 375),
        RnnShape("gru", 1536, 4, 187),
        RnnShape("gru", 2560, 1, 1500),
        RnnShape("gru", 2560, 1, 750),
        RnnShape("gru", 2560, 1, 375),
        RnnShape("gru", 2560, 1, 187),
        RnnShape("gru", 2560, 2, 1500),
        RnnShape("gru", 2560, 2, 750),
        RnnShape("gru", 2560, 2, 375),
        RnnShape("gru", 2560, 2, 187),
        RnnShape("gru", 2560, 4, 1500),
        RnnShape("gru", 2560, 4, 750),
        RnnShape("gru", 2560, 4, 375),
        RnnShape("gru", 2560, 4, 187),
        RnnShape("gru", 512, 1, 1),
        RnnShape("gru", 512, 2, 1),
        RnnShape("gru", 512, 4, 1),
        RnnShape("gru", 1024, 1, 1500),
        RnnShape("gru", 1024, 2, 1500),
        RnnShape("gru", 1024, 4, 1500),
    ),
    "device": (
        RnnShape("vanilla", 32, 1, 672),
        RnnShape("vanilla", 64, 1, 96),
        RnnShape("lstm", 256, 1, 150),
    ),
}
