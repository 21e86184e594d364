"""Greedy autoregressive decoding with a key/value cache, for any engine that runs one step.

A decoding-step model (tests/zoo/transformer_cases.export_decode: GPT-2's) takes input_ids
[1, 1], position_ids [1, 1] and past_<layer>_k/v [1, heads, past, head_dim], and gives logits
[1, 1, vocab] and the presents, one position longer. `generate` feeds each step's presents
back as the next step's past and the arg-max token as its input, so the cache grows by one
position per token: the run-time dim a compile per length would pay for at every token."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Step = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class Generation:
    tokens: list[int]
    logits: list[np.ndarray]  # each step's [vocab] logits
    seconds: list[float]  # each step's wall time

    @property
    def tokens_per_second(self) -> float:
        """Over all steps but the first (a first call may allocate what later ones reuse)."""
        timed = self.seconds[1:] or self.seconds
        return len(timed) / sum(timed)


def start_cache(past_names: list[str], heads: int, head_dim: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A cache of `length` positions, as a prompt would leave it (random, N(0, 1))."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal((1, heads, length, head_dim)).astype(np.float32) for name in past_names}


def generate(step: Step, past: dict[str, np.ndarray], token: int, steps: int) -> Generation:
    """`steps` greedy tokens after `token`, from the cache `past` (its names in input order)."""
    names = list(past)
    position = next(iter(past.values())).shape[2]
    tokens, logits, seconds = [], [], []
    for _ in range(steps):
        feeds = {"input_ids": np.array([[token]], np.int64), "position_ids": np.array([[position]], np.int64), **past}
        start = time.perf_counter()
        out = step(feeds)
        seconds.append(time.perf_counter() - start)
        logits.append(out[0][0, -1])
        token = int(np.argmax(out[0][0, -1]))
        tokens.append(token)
        past = dict(zip(names, out[1:]))
        position += 1
    return Generation(tokens, logits, seconds)
