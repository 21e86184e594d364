"""One updating line on stderr while a compile runs: stage, kernels done, seconds so far.

Shown when asked (compile(progress=True)) or, by default, when stderr is a terminal
and the compile has already taken a second, so quick compiles and captured output
(tests, pipes) stay silent. A ticker thread redraws the line while a long stage (LLVM's
optimiser, which releases the GIL) runs, so the seconds keep advancing."""

from __future__ import annotations

import sys
import threading
import time
from typing import Self, TextIO

AUTO_DELAY_S = 1.0
_TICK_S = 0.25
_MIN_REDRAW_S = 0.05


class Progress:
    """Use as a context manager: leaving it stops the ticker and ends the line."""

    def __init__(self, stream: TextIO | None, delay: float = 0.0):
        self._stream = stream
        self._delay = delay
        self._start = time.perf_counter()
        self._stage = ""
        self._text = ""
        self._drawn_at = 0.0
        self._width = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @classmethod
    def for_compile(cls, enabled: bool | None) -> Progress:
        """progress=True: always; None: only on a terminal, after AUTO_DELAY_S; False: never."""
        stream = sys.stderr
        if enabled is None:
            try:
                enabled = stream.isatty()
            except (AttributeError, ValueError):
                enabled = False
            return cls(stream if enabled else None, AUTO_DELAY_S)
        return cls(stream if enabled else None)

    def __enter__(self) -> Self:
        if self._stream is not None:
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
        self._draw(f"{self._stage} {done}/{total} kernels", force=done == total)

    def finish(self, what: str) -> None:
        """Replace the line with a summary, if anything was shown."""
        with self._lock:
            self._stop.set()
            if self._width:
                self._write(f"hobbit: {what} in {time.perf_counter() - self._start:.2f} s", end="\n")
                self._width = 0

    def _tick(self) -> None:
        while not self._stop.wait(_TICK_S):
            if self._text:
                self._draw(self._text, force=True)

    def _draw(self, text: str, force: bool) -> None:
        if self._stream is None or self._stop.is_set():
            return
        self._text = text
        now = time.perf_counter()
        elapsed = now - self._start
        if elapsed < self._delay or (not force and now - self._drawn_at < _MIN_REDRAW_S):
            return
        with self._lock:
            if self._stop.is_set():
                return
            self._drawn_at = now
            self._write(f"hobbit: {text} ({elapsed:.1f} s)", end="")

    def _write(self, line: str, end: str) -> None:
        padding = " " * max(0, self._width - len(line))
        self._stream.write(f"\r{line}{padding}{end}")
        self._stream.flush()
        self._width = len(line)
