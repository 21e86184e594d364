"""What identifies an ONNX model's content, for the compile cache's key (OnnxSource.fingerprint).

A file hashes like its bytes (plus the external-data files it names, by name and content), so
a model pickled as the file's bytes (hobbit.runtime.recipe) finds the entry its first compile
stored; bytes hash as they are; a ModelProto is walked field by field, its initializers'
bytes hashed where they lie (serialising a large model first would copy all its weights).
Bytes and ModelProtos add the external-data files they name in compile(external_data_dir=...)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import onnx

from hobbit.frontend.common.source import feed, feed_file
from hobbit.frontend.onnx.external_data import external_tensors, location

# How a TensorProto's external_data entry {key: "location"} is encoded: a file without
# these bytes has no external data, so most models skip parsing for their key.
_LOCATION_MARKER = b"\x0a\x08location"

# Fields walked field by field instead of serialised whole: the initializers' bytes are
# hashed where they lie.
_DEEP = {"graph", "graph.initializer"}


def feed_model(h, model: str | os.PathLike | bytes | onnx.ModelProto, folder: str | os.PathLike | None) -> None:
    """Add `model` (with the external-data files it names, from `folder` for bytes and
    ModelProtos, from its own folder for a file) to the hash `h`."""
    if isinstance(model, onnx.ModelProto):
        _hash_message(h, model, "")
        if folder is not None:
            _hash_external(h, model, Path(folder))
    elif isinstance(model, (bytes, bytearray)):
        feed(h, "bytes", bytes(model))
        if folder is not None and has_external_data(model):
            _hash_external(h, onnx.ModelProto.FromString(bytes(model)), Path(folder))
    else:
        _hash_model_file(h, Path(os.fspath(model)))


def has_external_data(data: bytes | mmap.mmap) -> bool:
    """Whether serialized model bytes may name external-data files (a scan for the encoded key;
    a false positive only costs a parse)."""
    return data.find(_LOCATION_MARKER) >= 0


def _hash_message(h, msg, path: str) -> None:
    for fd, value in msg.ListFields():
        name = path + fd.name
        if fd.message_type is not None:
            items = [value] if hasattr(value, "ListFields") else list(value)
            for i, item in enumerate(items):
                if name in _DEEP:
                    feed(h, f"{name}[{i}]", b"")
                    _hash_message(h, item, name + ".")
                else:
                    feed(h, name, item.SerializeToString(deterministic=True))
        elif isinstance(value, bytes):
            feed(h, name, value)
        elif isinstance(value, (str, int, float, bool)):
            feed(h, name, repr(value).encode())
        else:
            items = list(value)
            if items and isinstance(items[0], bytes):
                for item in items:
                    feed(h, name, item)
            else:
                feed(h, name, repr(items).encode())


def _hash_model_file(h, path: Path) -> None:
    """A file hashes like its bytes (plus its external-data files)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            feed(h, "bytes", b"")
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            feed(h, "bytes", data)
            external = has_external_data(data)
    if external:
        _hash_external(h, onnx.load_model(os.fspath(path), load_external_data=False), path.parent)


def _hash_external(h, proto: onnx.ModelProto, folder: Path) -> None:
    """The external-data files a model names, by name and content. A name that leads out of
    `folder` is a ValueError (no key: the import then refuses the model), so that not even
    a hash is taken of a file outside it."""
    root = folder.resolve()
    for name in sorted({location(tensor) for _, tensor in external_tensors(proto)}):
        path = (folder / name).resolve()
        if not path.is_relative_to(root):
            raise ValueError(f"external data '{name}' is outside {folder}")
        feed(h, "external", name.encode())
        feed_file(h, path)
