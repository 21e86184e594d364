"""The ONNX converter table: (domain, op_type) -> converters by opset version.

A converter turns one ONNX node into graph ops through an OnnxContext (importer.py). It is
registered with the first opset version whose semantics it implements; the
frontend picks the largest registered version <= the model's opset for that
domain, as ONNX's own schema versioning does. The converters (ops/) register
themselves here when imported; the modules that read the whole table (the
importer, importer.py, and hobbit.frontend.supported) import them, so this table
imports nothing above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Converter = Callable[..., list]


@dataclass(frozen=True)
class ConverterEntry:
    domain: str
    op_type: str
    since: int
    fn: Converter


_TABLE: dict[tuple[str, str], list[ConverterEntry]] = {}


def converter(op_type: str, since: int = 1, domain: str = "") -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        entries = _TABLE.setdefault((domain, op_type), [])
        if any(e.since == since for e in entries):
            raise ValueError(f"converter for {op_type} since opset {since} registered twice")
        entries.append(ConverterEntry(domain, op_type, since, fn))
        entries.sort(key=lambda e: e.since)
        return fn
    return register


def lookup(domain: str, op_type: str, opset: int) -> ConverterEntry | None:
    domain = "" if domain == "ai.onnx" else domain
    best = None
    for entry in _TABLE.get((domain, op_type), []):
        if entry.since <= opset:
            best = entry
    return best


def table() -> dict[tuple[str, str], list[ConverterEntry]]:
    return {k: list(v) for k, v in sorted(_TABLE.items())}
