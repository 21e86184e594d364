"""Progress on stderr while a compile (or a quantization) runs: stage, kernels or batches
done, seconds so far.

Shown when asked (compile(progress=True)) or, by default, when stderr is a terminal
and the compile has already taken a second, so quick compiles and captured output
(tests, pipes) stay silent. On a terminal it is one line redrawn in place, and a ticker
thread redraws it while a long stage (LLVM's optimiser, which releases the GIL) runs, so
the seconds keep advancing. Anywhere else (a log file, a pipe) carriage returns would pile
up into one long line, so it writes plain lines instead: one when a stage starts, its last
count when it ends, and a count at most every LOG_INTERVAL_S in between."""

from __future__ import annotations

import sys
import threading
import time
from typing import Self, TextIO

AUTO_DELAY_S = 1.0
LOG_INTERVAL_S = 10.0
_TICK_S = 0.25
_MIN_REDRAW_S = 0.05


class Progress:
    """Use as a context manager: leaving it stops the ticker and ends the line."""

    def __init__(self, stream: TextIO | None, delay: float = 0.0):
        self._stream = stream
        self._live = stream is not None and _is_terminal(stream)
        self._delay = delay
        self._start = time.perf_counter()
        self._stage = ""
        self._text = ""
        self._drawn_at = 0.0
        self._width = 0
        self._logged_label: str | None = None  # not live: the stage of the last line written
        self._logged_at = 0.0
        self._pending = ""  # not live: the latest line held back by LOG_INTERVAL_S
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @classmethod
    def for_compile(cls, enabled: bool | None) -> Progress:
        """progress=True: always; None: only on a terminal, after AUTO_DELAY_S; False: never."""
        stream = sys.stderr
        if enabled is None:
            return cls(stream if _is_terminal(stream) else None, AUTO_DELAY_S)
        return cls(stream if enabled else None)

    def __enter__(self) -> Self:
        if self._live:
            self._ticker = threading.Thread(target=self._tick, name="hobbit-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self._width:
                self._stream.write("\n")
                self._width = 0

    def stage(self, name: str) -> None:
        self._stage = name
        self._draw(name, force=True)

    def kernel(self, done: int, total: int) -> None:
        """build_module's on_kernel callback."""
        self._draw(f"{self._stage} {done}/{total} kernels", force=done == total, label=self._stage)

    def finish(self, what: str) -> None:
        """Replace the line with a summary (a last line when not live), if anything was shown."""
        with self._lock:
            self._stop.set()
            summary = f"hobbit: {what} in {time.perf_counter() - self._start:.2f} s"
            if self._width:
                self._write(summary, end="\n")
                self._width = 0
            elif self._logged_label is not None:
                self._log_line(self._pending)
                self._log_line(summary)

    def _tick(self) -> None:
        while not self._stop.wait(_TICK_S):
            if self._text:
                self._draw(self._text, force=True)

    def _draw(self, text: str, force: bool, label: str | None = None) -> None:
        """Show `text`; `label` names its stage (default: the text before ': ', so that
        "calibrating: 3/8 batches" counts in the stage "calibrating")."""
        if self._stream is None or self._stop.is_set():
            return
        self._text = text
        now = time.perf_counter()
        elapsed = now - self._start
        if not self._live:
            if elapsed >= self._delay:
                self._log(f"hobbit: {text} ({elapsed:.1f} s)", label or text.split(": ", 1)[0], now)
            return
        if elapsed < self._delay or (not force and now - self._drawn_at < _MIN_REDRAW_S):
            return
        with self._lock:
            if self._stop.is_set():
                return
            self._drawn_at = now
            self._write(f"hobbit: {text} ({elapsed:.1f} s)", end="")

    def _log(self, line: str, label: str, now: float) -> None:
        """Not live: a line when the stage changes (after the last count of the one before)
        or LOG_INTERVAL_S after the last line; else hold it back as the latest count."""
        with self._lock:
            if self._stop.is_set():
                return
            if label == self._logged_label and now - self._logged_at < LOG_INTERVAL_S:
                self._pending = line
                return
            if label != self._logged_label:
                self._log_line(self._pending)
            self._log_line(line)
            self._logged_label, self._logged_at = label, now

    def _log_line(self, line: str) -> None:
        self._pending = ""
        if line:
            self._stream.write(line + "\n")
            self._stream.flush()

    def _write(self, line: str, end: str) -> None:
        padding = " " * max(0, self._width - len(line))
        self._stream.write(f"\r{line}{padding}{end}")
        self._stream.flush()
        self._width = len(line)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
