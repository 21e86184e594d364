"""The per-kernel records generated code keeps in the arena, and their sizes.

Memory planning (hobbit.passes.memory) reserves these bytes; the emitters
(hobbit.backend.cpu.parallel, hobbit.emit.status) and codegen (hobbit.backend.cpu.module)
address them. One definition here keeps the two sides in step."""

from __future__ import annotations

CLAIM_STRIDE = 64  # bytes between claim counters: one cache line each
CLAIMED_LOOPS = 3  # claimed loops (bands or runs) a kernel may hold: a Winograd conv's three phases
STATUS_BYTES = 64  # a cache line: records written by different threads never share one


def step_bytes(threads: int) -> int:
    """A team step's state (hobbit.backend.cpu.team): its count of finished ids, then one bit
    per id claimed, rounded up to cache lines."""
    words = 1 + -(-threads // 64)
    return -(-8 * words // CLAIM_STRIDE) * CLAIM_STRIDE


def claim_bytes(threads: int) -> int:
    """Zeroed counter bytes per kernel: its step's state, then for each claimed loop one
    line per share and one for the count of finished pieces."""
    return step_bytes(threads) + CLAIM_STRIDE * (threads + 1) * CLAIMED_LOOPS if threads > 1 else 0
