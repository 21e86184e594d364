"""The process's own memory: resident set size now and at its peak, and giving freed heap back.

A compile builds and drops many short-lived objects (numpy constants during folding and
layout, llvmlite's IR objects, the IR text). glibc's malloc keeps most of what is freed
inside its arenas instead of returning it to the kernel, so a process that compiled
ResNet-50 stayed at 569 MB resident where `malloc_trim(0)` brought it to 316 MB.
`release_freed_heap` asks glibc to return those pages; on a C library without
malloc_trim (musl, macOS) it does nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

_STATUS = "/proc/self/status"


def _status_kib(field: str) -> int | None:
    """A `kB` line of /proc/self/status (VmRSS, VmHWM), or None where there is no procfs."""
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_bytes() -> int | None:
    """Resident set size of this process now (VmRSS), or None where Linux's procfs is absent."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * 1024


def peak_rss_bytes() -> int | None:
    """The largest resident set size this process has had (VmHWM), or None without procfs."""
    kib = _status_kib("VmHWM")
    return None if kib is None else kib * 1024


@cache
def _malloc_trim():
    """glibc's malloc_trim, or None when the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_heap() -> bool:
    """Return the heap pages malloc holds but nobody uses to the kernel (glibc malloc_trim(0),
    which also trims every thread's arena). True when it ran; False without glibc."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def release_garbage() -> bool:
    """Collect unreachable reference cycles, then release_freed_heap().

    The graph IR (nodes and values refer to each other) and llvmlite's IR objects form
    cycles, so the constants and modules a compile stage replaces are only freed by the
    cyclic collector, which rarely gets to its oldest generation during a compile: after
    ResNet-50's passes a collection freed 130 MiB of replaced weights, after its codegen
    175 MiB of llvmlite objects (that one walks ~560k objects: 0.6 s of a 12 s compile).
    Returns what release_freed_heap returned."""
    _collect_keeping_ctrl_c()
    return release_freed_heap()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block (as it was after it).

    For a stage that builds a large, long-lived object graph and drops little: IR emission.
    Each of the collector's passes walks the objects built so far, and llvmlite's IR is
    hundreds of thousands of them; what the stage drops (a handed-off kernel's blocks) has
    by then mostly reached the oldest generation, which the collector rarely reaches during a
    compile anyway, and release_garbage() after the stage collects it. Measured: SqueezeNet's
    emission 2.65-3.29 -> 2.0 s (a loaded 2-core host); ResNet-50's compile peaks at 516
    instead of 483 MB resident, the garbage the young collections used to free."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_PAGES_LOCK = threading.Lock()
_small_pages_depth = 0
_huge_pages_before = False


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's transparent-huge-page advice off inside the block (as it was after it).

    numpy asks the kernel for 2 MiB pages on every array of 4 MiB or more. A compile writes
    each weight two or three times into fresh arrays (folded, packed into panels, placed in
    the blob), and on a VM that hands its free memory back to the host (Firecracker's
    virtio-balloon free page reporting, which reports blocks of 2 MiB and up) each huge page
    is a block the host must fault back in. Measured on such a 2-core VM (Zen 3), cold
    compiles alternating with and without the advice: VGG-16 7.7-8.0 -> 5.5-5.9 s (its
    passes and packing 3.4 -> 1.4 s), BERT-base 4.1-4.3 -> 3.6-3.8 s, ResNet-50 unchanged;
    the compiled models ran no slower with their weights in small pages (VGG-16 85.7-91.7
    against 89.2-89.4 ms, BERT-base 153-177 against 142-147 ms, 2 threads). Counted, so
    that compiles in several threads leave the advice as it was only when the last ends; a
    numpy without the switch (it is private) is left alone."""
    global _small_pages_depth, _huge_pages_before
    switch = _madvise_switch()
    if switch is None:
        yield
        return
    with _PAGES_LOCK:
        if _small_pages_depth == 0:
            _huge_pages_before = switch(False)
        _small_pages_depth += 1
    try:
        yield
    finally:
        with _PAGES_LOCK:
            _small_pages_depth -= 1
            if _small_pages_depth == 0:
                switch(_huge_pages_before)


@cache
def _madvise_switch():
    """numpy's _set_madvise_hugepage (it returns the setting it replaced), or None."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray
    return getattr(multiarray, "_set_madvise_hugepage", None)


def _collect_keeping_ctrl_c() -> None:
    """gc.collect(), with a Ctrl-C that arrives meanwhile raised after it.

    The collection runs llvmlite's finalizers, and Python drops an exception raised inside a
    finalizer ("Exception ignored in ... __del__"), so a KeyboardInterrupt delivered there
    was lost and the compile went on. Only the main thread can hold the signal back."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        gc.collect()
        return
    pending: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        gc.collect()
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pending:
        raise KeyboardInterrupt
