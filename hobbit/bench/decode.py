"""Greedy autoregressive decoding with a key/value cache, for any engine that runs one step.

A decoding-step model (tests/zoo/transformer_cases.export_decode: GPT-2's) takes input_ids
[1, 1], position_ids [1, 1] and past_<layer>_k/v [1, heads, past, head_dim], and gives logits
[1, 1, vocab] and the presents, one position longer. `generate` feeds each step's presents
back as the next step's past and the arg-max token as its input, so the cache grows by one
position per token: the run-time dim a compile per length would pay for at every token.
`generate_in_place` is the same loop on hobbit's cache kept in place (DynamicModel.cache:
hobbit.runtime.kvcache), which copies no past per token."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from hobbit.errors import ConfigError

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
    return _loop(step, past, lambda out: dict(zip(names, out[1:])), token, steps)


def generate_in_place(model, past: dict[str, np.ndarray], token: int, steps: int) -> Generation:
    """generate() on a DynamicModel's cache kept in place (model.cache(past)); each step's time
    is its run(), as generate() times it."""
    cache = model.cache(past)
    return _loop(lambda feeds: model.run(feeds, cache=cache), {}, lambda out: {}, token, steps,
                 next(iter(past.values())).shape[2])


def _loop(step: Step, past: dict[str, np.ndarray], fed_back: Callable[[list], dict], token: int, steps: int,
          position: int | None = None) -> Generation:
    if position is None:
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
        past = fed_back(out)
        position += 1
    return Generation(tokens, logits, seconds)


@dataclass(frozen=True)
class DecodeRow:
    """One thread count's greedy generation by both engines from the same cache."""

    threads: int
    steps: int
    hobbit: Generation  # the presents fed back as the pasts, as onnxruntime is fed
    in_place: Generation | None  # hobbit's cache kept in place (None: the model keeps none)
    onnxruntime: Generation
    compiles: int  # hobbit's compiles over the whole generation
    max_diff: float  # the largest logit difference over all steps (both of hobbit's loops)
    same_tokens: bool


def decode_inputs(model: onnx.ModelProto) -> tuple[list[str], str, int, int]:
    """The cache inputs of a decoding-step model (see the module docstring), the symbol of their
    length, and their heads and head_dim; a ConfigError where the model is not one."""
    names = [i.name for i in model.graph.input]
    past = [i for i in model.graph.input if i.name.startswith("past")]
    if not {"input_ids", "position_ids"} <= set(names) or not past:
        raise ConfigError(f"--decode times a decoding step: inputs input_ids, position_ids and past_* (a "
                          f"key/value cache); this model takes {names}")
    dims = past[0].type.tensor_type.shape.dim
    if len(dims) != 4 or not dims[2].dim_param or not dims[1].dim_value or not dims[3].dim_value:
        raise ConfigError(f"--decode needs the cache as [1, heads, past, head_dim] with a named past dim; "
                          f"'{past[0].name}' is {[d.dim_param or d.dim_value for d in dims]}")
    return [i.name for i in past], dims[2].dim_param, dims[1].dim_value, dims[3].dim_value


def run_decode(model: onnx.ModelProto, steps: int, threads: list[int], start: int = 4) -> list[DecodeRow]:
    """For each thread count: hobbit compiled once (the cache's length a run-time dim bounded
    by start + steps) and onnxruntime (hobbit.bench.ort's session), each generating `steps`
    greedy tokens from the same `start`-position cache."""
    import hobbit
    from hobbit.bench.ort import ort_session

    past_names, symbol, heads, head_dim = decode_inputs(model)
    cache = start_cache(past_names, heads, head_dim, start)
    rows = []
    for n in threads:
        ours = hobbit.compile(model, threads=n, cache=False, dynamic_shapes={symbol: (1, start + steps)})
        session = ort_session(model, n)
        theirs = generate(lambda feeds: session.run(None, feeds), cache, 1, steps)
        mine = generate(ours.run, cache, 1, steps)
        kept = generate_in_place(ours, cache, 1, steps) if getattr(ours, "cache_inputs", None) else None
        ran = [mine] + ([kept] if kept else [])
        diff = max(float(np.abs(a - b).max()) for g in ran for a, b in zip(g.logits, theirs.logits))
        rows.append(DecodeRow(n, steps, mine, kept, theirs, getattr(ours, "compiles", -1), diff,
                              all(g.tokens == theirs.tokens for g in ran)))
    return rows


def decode_table(rows: list[DecodeRow]) -> str:
    """A markdown table: tokens/s of both engines (hobbit's cache fed back, and kept in place),
    the ratio of the faster of hobbit's, and the checks."""
    lines = ["| threads | tokens | hobbit tokens/s | hobbit in place tokens/s | onnxruntime tokens/s | "
             "hobbit / onnxruntime time | hobbit compiles | max logit diff | same tokens |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = max(r.hobbit.tokens_per_second, r.in_place.tokens_per_second if r.in_place else 0.0)
        ratio = r.onnxruntime.tokens_per_second / best
        kept = f"{r.in_place.tokens_per_second:.1f}" if r.in_place else "-"
        lines.append(f"| {r.threads} | {r.steps} | {r.hobbit.tokens_per_second:.1f} | {kept} | "
                     f"{r.onnxruntime.tokens_per_second:.1f} | {ratio:.2f} | {r.compiles} | {r.max_diff:.1e} | "
                     f"{'yes' if r.same_tokens else 'NO'} |")
    return "\n".join(lines) + "\n"
