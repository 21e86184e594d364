"""How a kernel's rows are cut among threads and into bands.

`Threads.bands` (hobbit.backend.cpu.parallel) hands out bands of these static heights, and
plans size each thread's scratch and packing buffers by the tallest of them; both take
the cut from here, so the bands emitted are the bands sized."""

from __future__ import annotations


def band_heights(total: int, max_band: int, threads: int) -> list[int]:
    """The band heights Threads.bands hands out (all static), for sizing scratch and packing."""
    heights = set()
    for share in share_sizes(total, threads):
        count, small, big = cut(share, max_band)
        heights |= ({small + 1} if big else set()) | ({small} if count > big else set())
    return sorted(heights)


def share_sizes(total: int, threads: int) -> list[int]:
    """The sizes of split's shares of `total` among `threads` (two at most, none empty)."""
    return sorted({total // threads, -(-total // threads)} - {0})


def cut(share: int, max_band: int) -> tuple[int, int, int]:
    """(bands, height, taller): a share in bands of at most max_band rows, the first
    `taller` of them one row taller than `height`."""
    count = -(-share // max_band)
    small, big = divmod(share, count)
    return count, small, big
