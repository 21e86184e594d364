"""TensorFlow's tensor-bundle checkpoint (a SavedModel's variables/), read without
TensorFlow.

A bundle is `<prefix>.index`, a LevelDB-style sorted table mapping each variable's
checkpoint key to a BundleEntryProto (dtype, shape, shard, offset, size), the empty key
holding the BundleHeaderProto, and `<prefix>.data-NNNNN-of-NNNNN` shards holding the raw
little-endian bytes. The table is: data blocks of prefix-compressed entries ending in a
restart array, each block followed by a 5-byte trailer (compression type, crc32c), an
index block pointing at the data blocks, and a 48-byte footer (metaindex and index
block handles, padded, then an 8-byte magic number).

Why shards are read whole and tensors are numpy views on them: a ResNet50 has ~100 MB of
weights; one read per shard and np.frombuffer per variable makes that the cost of the
file I/O and nothing more, and a truncated shard is noticed by a size check, not by a
crash when a memory-mapped page turns out to be missing."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np
from google.protobuf.message import DecodeError

from hobbit.errors import CorruptModelError, UnsupportedItem, UnsupportedModelError
from hobbit.frontend.tf.attrs import dtype_of, shape_of
from hobbit.frontend.tf.graph import TFDType
from hobbit.frontend.tf.protos import DT_STRING, BundleEntryProto, BundleHeaderProto, TrackableObjectGraph

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_SIZE = 48
_BLOCK_TRAILER_SIZE = 5
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class _Reader:
    """Varints and little-endian integers out of one buffer, every overrun reported as
    a corrupt `path`."""

    def __init__(self, data: bytes | memoryview, path: str, pos: int = 0):
        self.data, self.path, self.pos = data, path, pos

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise CorruptModelError(f"{self.path}: a varint runs past its block (truncated checkpoint index?)")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise CorruptModelError(f"{self.path}: an entry runs past its block (truncated checkpoint index?)")
        chunk = bytes(self.data[self.pos : self.pos + size])
        self.pos += size
        return chunk


def _read_file(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise CorruptModelError(f"{path}: missing ({what})") from None
    except OSError as e:
        raise CorruptModelError(f"{path}: cannot be read ({what}): {e.strerror}") from None


def _block(data: bytes, path: str, handle: _Reader) -> memoryview:
    offset, size = handle.varint(), handle.varint()
    if offset + size + _BLOCK_TRAILER_SIZE > len(data):
        raise CorruptModelError(
            f"{path}: a block at {offset} (+{size} bytes) lies past the end of the file (truncated?)"
        )
    compression = data[offset + size]
    if compression != 0:
        raise UnsupportedModelError(
            [UnsupportedItem("compressed checkpoint block", "tf", 0, path, f"compression type {compression}")]
        )
    return memoryview(data)[offset : offset + size]


def _block_entries(block: memoryview, path: str) -> list[tuple[bytes, bytes]]:
    """A block's (key, value) pairs: each entry stores how many leading bytes its key
    shares with the previous one, the rest of the key, and the value."""
    if len(block) < 4:
        raise CorruptModelError(f"{path}: a table block too short for its restart count")
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * restarts
    if end < 0:
        raise CorruptModelError(f"{path}: a table block's restart array is larger than the block")
    reader = _Reader(block[:end], path)
    entries: list[tuple[bytes, bytes]] = []
    key = b""
    while reader.pos < end:
        shared, unshared, value_size = reader.varint(), reader.varint(), reader.varint()
        if shared > len(key):
            raise CorruptModelError(f"{path}: a table entry shares more key bytes than the previous key has")
        key = key[:shared] + reader.take(unshared)
        entries.append((key, reader.take(value_size)))
    return entries


def _table(path: str) -> dict[str, bytes]:
    data = _read_file(path, "TensorFlow checkpoint index")
    if len(data) < _FOOTER_SIZE:
        raise CorruptModelError(f"{path}: {len(data)} bytes, too short for a checkpoint index's footer (truncated?)")
    (magic,) = struct.unpack_from("<Q", data, len(data) - 8)
    if magic != _TABLE_MAGIC:
        raise CorruptModelError(f"{path}: not a TensorFlow checkpoint index (bad table magic; truncated?)")
    footer = _Reader(data, path, len(data) - _FOOTER_SIZE)
    footer.varint(), footer.varint()  # the metaindex block: empty in tensor bundles
    index = _block(data, path, footer)
    table: dict[str, bytes] = {}
    for _, handle in _block_entries(index, path):
        for key, value in _block_entries(_block(data, path, _Reader(handle, path)), path):
            table[key.decode("utf-8", "replace")] = value
    return table


@dataclass
class Checkpoint:
    """The entries of one bundle; tensors are read on demand, their shards once."""

    prefix: str
    num_shards: int
    entries: dict[str, object]
    _shards: dict[int, bytes] = field(default_factory=dict)

    def keys(self) -> list[str]:
        return list(self.entries)

    def tensor(self, key: str) -> np.ndarray | TFDType:
        """The value saved under `key`: a read-only numpy view on its shard, an object
        array of bytes for a string tensor, or the TFDType of a dtype numpy lacks."""
        entry = self.entries.get(key)
        if entry is None:
            raise CorruptModelError(f"{self.prefix}.index: no checkpoint entry '{key}'")
        if len(entry.slices):
            raise UnsupportedModelError(
                [UnsupportedItem("partitioned variable", "tf", 0, key, "saved as slices in the checkpoint")]
            )
        shape = shape_of(entry.shape, f"{self.prefix}.index: entry '{key}'") or ()
        raw = self._bytes(key, entry)
        if entry.dtype == DT_STRING:
            return _strings(raw, int(np.prod(shape, dtype=np.int64)), f"{self.prefix}: entry '{key}'").reshape(shape)
        dtype = dtype_of(entry.dtype)
        if isinstance(dtype, TFDType):
            return dtype
        count = int(np.prod(shape, dtype=np.int64))
        if len(raw) != count * dtype.itemsize:
            raise CorruptModelError(
                f"{self._shard_path(entry.shard_id)}: entry '{key}' has {len(raw)} bytes, "
                f"shape {shape} of {dtype} needs {count * dtype.itemsize}"
            )
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def object_graph(self):
        """The TrackableObjectGraph TF2 saves beside the variables, or None (TF1)."""
        if OBJECT_GRAPH_KEY not in self.entries:
            return None
        (serialized,) = self.tensor(OBJECT_GRAPH_KEY).reshape(-1)[:1]
        try:
            return TrackableObjectGraph.FromString(serialized)
        except DecodeError:
            raise CorruptModelError(f"{self.prefix}: its object graph is not a TrackableObjectGraph") from None

    def _shard_path(self, shard: int) -> str:
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def _bytes(self, key: str, entry) -> memoryview:
        if not 0 <= entry.shard_id < self.num_shards:
            raise CorruptModelError(
                f"{self.prefix}.index: entry '{key}' names shard {entry.shard_id} of {self.num_shards}"
            )
        if entry.shard_id not in self._shards:
            path = self._shard_path(entry.shard_id)
            self._shards[entry.shard_id] = _read_file(path, "TensorFlow checkpoint data")
        shard = self._shards[entry.shard_id]
        if entry.offset < 0 or entry.offset + entry.size > len(shard):
            raise CorruptModelError(
                f"{self._shard_path(entry.shard_id)}: entry '{key}' lies at bytes "
                f"{entry.offset}..{entry.offset + entry.size}, the file has {len(shard)} (truncated?)"
            )
        return memoryview(shard)[entry.offset : entry.offset + entry.size]


def _strings(raw: memoryview, count: int, where: str) -> np.ndarray:
    """A string tensor's bytes: a varint length per element, a 4-byte checksum of the
    lengths, then the elements back to back."""
    reader = _Reader(raw, where)
    lengths = [reader.varint() for _ in range(count)]
    reader.take(4)
    return np.array([reader.take(n) for n in lengths], dtype=object)


def read_checkpoint(prefix: str | os.PathLike) -> Checkpoint:
    """The bundle at `prefix` (e.g. "<saved model>/variables/variables"): its index is
    read and checked now, its data shards when a tensor is first asked for."""
    prefix = os.fspath(prefix)
    table = _table(prefix + ".index")
    entries = {}
    try:
        header = BundleHeaderProto.FromString(table.pop("", b""))
        for key, value in table.items():
            entries[key] = BundleEntryProto.FromString(value)
    except DecodeError:
        raise CorruptModelError(f"{prefix}.index: an entry is not a BundleEntryProto") from None
    if header.endianness != 0:
        raise UnsupportedModelError(
            [UnsupportedItem("big-endian checkpoint", "tf", 0, prefix, "only little-endian bundles are read")]
        )
    return Checkpoint(prefix, max(header.num_shards, 1), entries)
