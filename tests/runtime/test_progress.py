"""Progress on stderr: one line redrawn in place on a terminal; plain lines, few of them,
anywhere else (a log file would otherwise get one long line of carriage returns)."""

from __future__ import annotations

import io

import pytest

from hobbit.runtime import progress
from hobbit.runtime.progress import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _calibrate(show: Progress, batches: int) -> None:
    """What hobbit.quantize reports: a stage, a count per batch, the last count, a summary."""
    show.stage("compiling the calibration model (3 tensors as outputs)")
    for index in range(batches):
        show.stage(f"calibrating: {index}/{batches} batches")
    show.stage(f"calibrating: {batches}/{batches} batches")
    show.stage("writing the QDQ model")
    show.finish("quantized 2 weights")


def test_a_terminal_gets_one_line_redrawn() -> None:
    stream = _Terminal()
    with Progress(stream) as show:
        _calibrate(show, 200)
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.count("\r") > 200
    assert text.rsplit("\r", 1)[1].startswith("hobbit: quantized 2 weights in ")


def test_a_log_gets_a_line_per_stage_and_its_last_count() -> None:
    stream = io.StringIO()
    with Progress(stream) as show:
        _calibrate(show, 200)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert [line.rsplit(" (", 1)[0] for line in lines[:-1]] == [
        "hobbit: compiling the calibration model (3 tensors as outputs)", "hobbit: calibrating: 0/200 batches",
        "hobbit: calibrating: 200/200 batches", "hobbit: writing the QDQ model"]
    assert lines[-1].startswith("hobbit: quantized 2 weights in ")


def test_a_log_gets_a_count_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)
    stream = io.StringIO()
    with Progress(stream) as show:
        _calibrate(show, 5)
    assert [f"hobbit: calibrating: {i}/5 batches" in stream.getvalue() for i in range(6)] == [True] * 6


def test_compile_kernels_count_within_the_codegen_stage() -> None:
    stream = io.StringIO()
    with Progress(stream) as show:
        show.stage("codegen")
        for done in range(1, 51):
            show.kernel(done, 50)
        show.stage("LLVM optimise")
    heads = [line.rsplit(" (", 1)[0] for line in stream.getvalue().splitlines()]
    assert heads == ["hobbit: codegen", "hobbit: codegen 50/50 kernels", "hobbit: LLVM optimise"]
