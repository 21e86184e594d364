"""Bounds-checked access to a flatbuffer's tables, on top of the `flatbuffers` runtime.

The runtime trusts every offset it reads: a truncated or foreign file makes it raise
struct.error, or worse, hand back bytes of some other part of the file. Each read here
first checks that what it is about to touch lies inside the buffer, so a bad offset
becomes a CorruptModelError that names the file and the part being read."""

from __future__ import annotations

import numpy as np
from flatbuffers import number_types as N
from flatbuffers import util
from flatbuffers.table import Table as RawTable

from hobbit.errors import CorruptModelError

_UOFFSET = N.UOffsetTFlags.bytewidth


class FlatBuffer:
    """The whole file's bytes and the name to put in error messages."""

    def __init__(self, data: bytes | bytearray | memoryview, source: str, what: str):
        self.data = data
        self.size = len(data)
        self.source = source
        self.what = what

    def fail(self, part: str, detail: str) -> CorruptModelError:
        return CorruptModelError(f"{self.source}: not a valid {self.what} file: {part} {detail}")

    def check(self, start: int, length: int, part: str) -> None:
        if start < 0 or length < 0 or start + length > self.size:
            raise self.fail(
                part,
                f"lies outside the file (bytes {start}..{start + length} of {self.size}); "
                "the file is truncated or corrupt",
            )

    def identifier(self) -> bytes:
        self.check(0, _UOFFSET + 4, "the file header")
        return bytes(util.GetBufferIdentifier(self.data, 0))

    def root(self, part: str) -> Table:
        self.check(0, _UOFFSET, part)
        return Table(self, RawTable(self.data, 0).Indirect(0), part)


class Table:
    """One table of the buffer; `part` says which ("subgraph 0, tensor 3") for errors.
    Fields are addressed by their index in the schema (schema.py)."""

    __slots__ = ("_fb", "_raw", "part", "_vtable", "_vtable_size")

    def __init__(self, fb: FlatBuffer, pos: int, part: str):
        fb.check(pos, 4, part)
        self._fb = fb
        self._raw = RawTable(fb.data, pos)
        self.part = part
        self._vtable = pos - self._raw.Get(N.SOffsetTFlags, pos)
        fb.check(self._vtable, 4, f"{part}'s field table")
        self._vtable_size = self._raw.Get(N.VOffsetTFlags, self._vtable)
        fb.check(self._vtable, self._vtable_size, f"{part}'s field table")

    def _field(self, index: int) -> int:
        """The field's offset inside the table, 0 when the field is absent."""
        slot = 4 + 2 * index
        if slot + 2 > self._vtable_size:
            return 0
        return self._raw.Get(N.VOffsetTFlags, self._vtable + slot)

    def has(self, index: int) -> bool:
        return self._field(index) != 0

    def scalar(self, index: int, flags, default):
        off = self._field(index)
        if off == 0:
            return default
        pos = self._raw.Pos + off
        self._fb.check(pos, flags.bytewidth, f"{self.part}'s field {index}")
        return self._raw.Get(flags, pos)

    def _target(self, index: int, part: str) -> int | None:
        """Where the offset stored in field `index` points, checked; None if absent."""
        off = self._field(index)
        if off == 0:
            return None
        pos = self._raw.Pos + off
        self._fb.check(pos, _UOFFSET, part)
        target = self._raw.Indirect(pos)
        self._fb.check(target, _UOFFSET, part)
        return target

    def table(self, index: int, part: str) -> Table | None:
        target = self._target(index, part)
        return None if target is None else Table(self._fb, target, part)

    def _vector(self, index: int, width: int, part: str) -> tuple[int, int]:
        """(start of the elements, count) of the vector in field `index`; (0, 0) if absent."""
        target = self._target(index, part)
        if target is None:
            return 0, 0
        count = self._raw.Get(N.UOffsetTFlags, target)
        start = target + _UOFFSET
        self._fb.check(start, count * width, part)
        return start, count

    def numbers(self, index: int, flags, part: str) -> np.ndarray:
        """A numeric vector as a read-only numpy view into the file (empty if absent)."""
        start, count = self._vector(index, flags.bytewidth, part)
        return np.frombuffer(self._fb.data, N.to_numpy_type(flags), count, start)

    def ints(self, index: int, part: str) -> list[int]:
        return [int(v) for v in self.numbers(index, N.Int32Flags, part)]

    def tables(self, index: int, part: str) -> list[Table]:
        start, count = self._vector(index, _UOFFSET, part)
        tables = []
        for i in range(count):
            pos = start + i * _UOFFSET
            tables.append(Table(self._fb, self._raw.Indirect(pos), f"{part} {i}"))
        return tables

    def string(self, index: int, part: str) -> str | None:
        start, count = self._vector(index, 1, part)
        if not self.has(index):
            return None
        return bytes(self._fb.data[start : start + count]).decode("utf-8", errors="replace")
