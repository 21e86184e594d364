"""Where a `hobbit` command writes: every output path (-o, --markdown, --json, --plot) is
checked before the work starts, so a typo in a path costs a second, not a compile, a
calibration or a whole benchmark; and a write the system refuses after all (a full disk, a
folder removed meanwhile) is one error naming the path, never a traceback. A command's text
or bytes go to its -o FILE or to standard output (write_text, write_bytes); `inspect`'s
listing (on a CPU or a GPU target) is printed by print_listing."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hobbit.errors import OutputPathError

# The flags that name a file a command writes, by their argparse dest.
_FILE_FLAGS = (("output", "-o"), ("markdown", "--markdown"), ("json", "--json"), ("plot", "--plot"))


def planned_outputs(args: argparse.Namespace) -> list[tuple[str, str, bool]]:
    """(flag, path, is_folder) of everything the parsed command line will write: `compile
    --emit lib -o DIR` writes a folder, `zoo NAME` writes NAME.onnx unless -o says otherwise."""
    found = []
    for dest, flag in _FILE_FLAGS:
        path = getattr(args, dest, None)
        if path is not None:
            found.append((flag, path, dest == "output" and getattr(args, "emit", None) == "lib"))
    if args.command == "zoo" and args.name is not None and args.output is None:
        found.append(("NAME", f"{args.name}.onnx", False))
    return found


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, a command line whose outputs cannot be written."""
    for flag, path, folder in planned_outputs(args):
        (check_folder if folder else check_file)(path, flag)


def check_file(path: str, flag: str) -> None:
    """`path` can be created or overwritten as a file: it is not a folder, and the folder it
    goes into exists and lets this user create files."""
    target = Path(path)
    if target.is_dir():
        raise OutputPathError(f"{flag} {path}: is a folder; give the name of a file to write")
    if target.exists():
        if not os.access(target, os.W_OK):
            raise OutputPathError(f"{flag} {path}: the file exists and is not writable by this user")
        return
    _require_writable_folder(target.parent, flag, path)


def check_folder(path: str, flag: str) -> None:
    """`path` is a folder this user can write into, or can be made (its nearest existing
    ancestor is a writable folder)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise OutputPathError(f"{flag} {path}: is a file, and this writes a folder (library, header, weights, "
                              f"manifest); give a new or existing folder")
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    _require_writable_folder(existing, flag, path)


def _require_writable_folder(folder: Path, flag: str, path: str) -> None:
    if not folder.exists():
        raise OutputPathError(f"{flag} {path}: the folder {folder} does not exist; create it first")
    if not folder.is_dir():
        raise OutputPathError(f"{flag} {path}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{flag} {path}: this user cannot create files in {folder}")


@contextmanager
def writing(path: str | os.PathLike) -> Iterator[None]:
    """Around a write to `path`: an OSError (checked paths can still fail: a full disk, a
    folder removed meanwhile) becomes an OutputPathError naming the path."""
    try:
        yield
    except OSError as exc:
        raise OutputPathError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from exc


def write_text(text: str, path: str | None) -> None:
    """`text` to the file `path` (saying so on stderr), or to standard output when it is None."""
    if path is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    with writing(path), open(path, "w") as f:
        f.write(text)
    print(f"wrote {path} ({len(text)} characters)", file=sys.stderr)


def write_bytes(data: bytes, path: str | None) -> None:
    """`data` to the file `path` (saying so on stderr), or to standard output when it is None."""
    if path is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    with writing(path), open(path, "wb") as f:
        f.write(data)
    print(f"wrote {path} ({len(data)} bytes)", file=sys.stderr)


def print_listing(title: str, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]],
                  header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """The listing `hobbit inspect` prints (hobbit.cli.inspect; hobbit.cli.gpu for a GPU
    target): a title line, the model's inputs and outputs (name, type), then the header and
    one numbered row per kernel, each column padded to its widest cell."""
    print(title)
    for name, kind in inputs:
        print(f"  input  {name}: {kind}")
    for name, kind in outputs:
        print(f"  output {name}: {kind}")
    width = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    print("  #  " + "  ".join(h.ljust(w) for h, w in zip(header, width)).rstrip())
    for i, row in enumerate(rows):
        print(f"{i:3d}  " + "  ".join(c.ljust(w) for c, w in zip(row, width)).rstrip())
