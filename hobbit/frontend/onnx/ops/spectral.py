"""Converters for DFT, STFT and MelWeightMatrix.

A DFT of static length is a linear map, so it is one MatMul against a constant
matrix: the transformed axis is moved next to the trailing real/imaginary dim,
the two are flattened into rows of [n, re/im] pairs, and the matrix maps them to
[k, re/im] pairs (or to real samples for the inverse of a one-sided spectrum).
Zero padding and truncation to dft_length, the 1/n of the inverse, one-sided
output and the conjugate symmetry an inverse one-sided transform relies on are
all rows and columns of that matrix. The product runs in float64: outputs that
cancel to nearly zero then come out as accurately as from an FFT in float64, which
is what onnxruntime and the ONNX reference compute. STFT gathers the frames,
applies the window and runs the same matrix; MelWeightMatrix is a constant."""

from __future__ import annotations

import numpy as np

from hobbit.errors import Unsupported
from hobbit.frontend.common.half import narrow, widen
from hobbit.frontend.onnx.converters import converter
from hobbit.frontend.onnx.types import onnx_dtype
from hobbit.graph.shapes import normalize_axis

# The dense matrix grows with the square of the length; past this many entries (128 MiB
# of float64) a transform needs an FFT kernel, which hobbit does not have.
MAX_MATRIX_ENTRIES = 1 << 24


def dft_matrix(n_in: int, channels: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """The [n_in * channels, out] float64 matrix of a DFT of `length` points.

    Rows are input (position, re/im) pairs, zero past `length` (truncation); missing
    inputs are zero padding. Columns are (bin, re/im) pairs, or real samples when an
    inverse one-sided transform yields a real signal."""
    if n_in * channels * 2 * length > MAX_MATRIX_ENTRIES:
        raise Unsupported(f"a DFT of {length} points over {n_in} inputs (too large for the dense "
                          "DFT matrix hobbit uses; there is no FFT kernel)")
    if inverse and onesided:
        bins = np.arange(length // 2 + 1)
        samples = np.arange(length)
        theta = 2 * np.pi * np.outer(bins, samples) / length
        weight = np.where((bins == 0) | (2 * bins == length), 1.0, 2.0)[:, None] / length
        matrix = np.zeros((n_in, channels, length))
        used = min(n_in, len(bins))
        matrix[:used, 0] = (weight * np.cos(theta))[:used]
        if channels == 2:
            matrix[:used, 1] = (-weight * np.sin(theta))[:used]
        return matrix.reshape(n_in * channels, length)
    bins = length // 2 + 1 if onesided else length
    theta = 2 * np.pi * np.outer(np.arange(n_in), np.arange(bins)) / length
    cos, sin = np.cos(theta), np.sin(theta)
    sign, scale = (1.0, 1.0 / length) if inverse else (-1.0, 1.0)
    matrix = np.zeros((n_in, channels, bins, 2))
    matrix[:, 0, :, 0] = cos * scale  # re(x) -> re(y): cos; re(x) -> im(y): sign * sin
    matrix[:, 0, :, 1] = sign * sin * scale
    if channels == 2:  # im(x) -> re(y): -sign * sin; im(x) -> im(y): cos
        matrix[:, 1, :, 0] = -sign * sin * scale
        matrix[:, 1, :, 1] = cos * scale
    matrix[length:] = 0.0
    return matrix.reshape(n_in * channels, bins * 2)


def _float64(ctx, x):
    return ctx.emit1("Cast", [x], {"to": "float64"}) if np.dtype(x.dtype) != np.float64 else x


def _dft(ctx, x, axis: int, length: int | None, inverse: bool, onesided: bool):
    """The DFT of float64 `x` along `axis`."""
    rank = len(x.shape)
    channels = x.shape[-1]
    if rank < 2 or channels not in (1, 2):
        raise Unsupported(f"DFT input of shape {tuple(x.shape)} (the last dim must be 1 or 2)")
    axis = normalize_axis(axis, rank, "DFT axis")
    if axis == rank - 1:
        raise Unsupported("DFT over the real/imaginary dim")
    if inverse and onesided and channels != 2:
        raise Unsupported("an inverse one-sided DFT of a real input")
    n_in = x.shape[axis]
    if length is None:
        length = 2 * (n_in - 1) if inverse and onesided else n_in
    if length < 1:
        raise Unsupported(f"DFT length {length}")
    others = [d for d in range(rank - 1) if d != axis]
    moved = ctx.emit1("Transpose", [x], {"perm": tuple(others) + (axis, rank - 1)})
    outer = tuple(x.shape[d] for d in others)
    rows = ctx.emit1("Reshape", [moved], {"shape": (int(np.prod(outer, dtype=np.int64)), n_in * channels)})
    matrix = dft_matrix(n_in, channels, length, inverse, onesided)
    y = ctx.emit1("MatMul", [rows, ctx.const(matrix)])
    out_channels = 1 if inverse and onesided else 2
    bins = matrix.shape[1] // out_channels
    y = ctx.emit1("Reshape", [y], {"shape": outer + (bins, out_channels)})
    back = list(range(len(others)))
    back.insert(axis, len(others))
    return ctx.emit1("Transpose", [y], {"perm": tuple(back) + (rank - 1,)})


def _scalar(ctx, v, what: str) -> int | None:
    if v is None:
        return None
    data = ctx.const_value(v, what)
    if data.size != 1:
        raise Unsupported(f"{what} of shape {data.shape}")
    return int(data.reshape(-1)[0])


def _input(ins: list, index: int):
    return ins[index] if len(ins) > index else None


@converter("DFT", since=17)
def dft_attr_axis(ctx, node, ins):
    """Opsets 17-19: `axis` is an attribute (default 1)."""
    a = ctx.attrs(node)
    x = _float64(ctx, widen(ctx, "DFT", ins[0]))
    length = _scalar(ctx, _input(ins, 1), "DFT dft_length")
    y = _dft(ctx, x, int(a.get("axis", 1)), length, bool(a.get("inverse", 0)), bool(a.get("onesided", 0)))
    return [narrow(ctx, y, ins[0].dtype)]


@converter("DFT", since=20)
def dft_input_axis(ctx, node, ins):
    """Opset 20: `axis` is an input (default -2, the last signal dim)."""
    a = ctx.attrs(node)
    x = _float64(ctx, widen(ctx, "DFT", ins[0]))
    length = _scalar(ctx, _input(ins, 1), "DFT dft_length")
    axis = _scalar(ctx, _input(ins, 2), "DFT axis")
    y = _dft(ctx, x, -2 if axis is None else axis, length, bool(a.get("inverse", 0)), bool(a.get("onesided", 0)))
    return [narrow(ctx, y, ins[0].dtype)]


@converter("STFT", since=17)
def stft(ctx, node, ins):
    """Frames gathered at multiples of frame_step, windowed, then the DFT matrix."""
    signal = _float64(ctx, widen(ctx, "STFT", ins[0]))
    step = _scalar(ctx, ins[1], "STFT frame_step")
    window = _input(ins, 2)
    length = _scalar(ctx, _input(ins, 3), "STFT frame_length")
    if window is not None:
        if len(window.shape) != 1 or (length is not None and window.shape[0] != length):
            raise Unsupported(f"STFT window of shape {tuple(window.shape)}")
        length = window.shape[0]
    if len(signal.shape) != 3 or signal.shape[2] not in (1, 2):
        raise Unsupported(f"STFT signal of shape {tuple(signal.shape)} (expected [batch, length, 1 or 2])")
    batch, samples, channels = signal.shape
    if length is None or step is None or length < 1 or step < 1 or length > samples:
        raise Unsupported(f"STFT frame_length {length} and frame_step {step} for {samples} samples")
    frames = 1 + (samples - length) // step
    starts = np.arange(frames, dtype=np.int64)[:, None] * step
    indices = ctx.const(starts + np.arange(length, dtype=np.int64)[None, :])
    framed = ctx.emit1("Gather", [signal, indices], {"axis": 1})  # [batch, frames, length, channels]
    if window is not None:
        shaped = ctx.emit1("Reshape", [_float64(ctx, widen(ctx, "STFT", window))], {"shape": (length, 1)})
        framed = ctx.emit1("Mul", [framed, shaped])
    onesided = bool(ctx.attrs(node).get("onesided", 1))
    if onesided and channels == 2:
        raise Unsupported("a one-sided STFT of a complex signal")
    rows = ctx.emit1("Reshape", [framed], {"shape": (batch * frames, length * channels)})
    matrix = dft_matrix(length, channels, length, False, onesided)
    y = ctx.emit1("MatMul", [rows, ctx.const(matrix)])
    y = ctx.emit1("Reshape", [y], {"shape": (batch, frames, matrix.shape[1] // 2, 2)})
    return [narrow(ctx, y, ins[0].dtype)]


def mel_weight_matrix(num_mel_bins: int, dft_length: int, sample_rate: int, lower_hz: float,
                      upper_hz: float) -> np.ndarray:
    """Triangular mel filters over the dft_length // 2 + 1 spectrogram bins, as ONNX defines
    them: mel points evenly spaced over num_mel_bins + 2 steps, mapped back to bins."""
    def to_mel(hz: float) -> float:
        return 2595 * np.log1p(hz / 700) / np.log(10)

    low, high = to_mel(lower_hz), to_mel(upper_hz)
    step = (high - low) / (num_mel_bins + 2)
    points = np.arange(num_mel_bins + 2) * step + low
    hertz = 700 * np.expm1(points / 2595 * np.log(10))
    bins = ((dft_length + 1) * hertz // sample_rate).astype(np.int64)
    if bins.min() < 0 or bins.max() > dft_length // 2:
        raise Unsupported("MelWeightMatrix edges beyond the spectrogram bins")
    out = np.zeros((dft_length // 2 + 1, num_mel_bins))
    for i in range(num_mel_bins):
        left, centre, right = bins[i], bins[i + 1], bins[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            for j in range(left, centre + 1):
                out[j, i] = (j - left) / (centre - left)
        for j in range(centre, right):
            out[j, i] = (right - j) / (right - centre)
    return out


@converter("MelWeightMatrix", since=17)
def mel_weight(ctx, node, ins):
    values = [ctx.const_value(v, f"MelWeightMatrix input {i}").reshape(-1)[0] for i, v in enumerate(ins[:5])]
    num_mel_bins, dft_length, sample_rate = (int(v) for v in values[:3])
    if num_mel_bins < 1 or dft_length < 1 or sample_rate < 1:
        raise Unsupported(f"MelWeightMatrix with {num_mel_bins} bins, dft_length {dft_length}, rate {sample_rate}")
    dtype = onnx_dtype(int(ctx.attrs(node).get("output_datatype", 1)), ctx.node_name)
    matrix = mel_weight_matrix(num_mel_bins, dft_length, sample_rate, float(values[3]), float(values[4]))
    return [ctx.const(matrix.astype(dtype))]
