"""Whether a folder holds models hobbit exported (hobbit.runtime.export: lib<name>.so beside
its manifest <name>.json; a GPU model's <name>.ptx or <name>.hsaco in its place,
hobbit.runtime.gpu_export), and what to tell a user who passed the wrong kind of path
to hobbit.load or a model path to an export. It lives on the frontend floor because the
frontend asks it about a folder given as a model (hobbit.load, above, asks it too); light on
purpose: no LLVM, no ctypes."""

from __future__ import annotations

import os
from pathlib import Path


# What beside <name>.json makes it an export: a library, or a GPU model's device code.
_CODE = ("lib{}.so", "{}.ptx", "{}.hsaco")


def exported_names(folder: Path) -> list[str]:
    """The names of the exported models in `folder`, sorted (none for a file or a missing path)."""
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json")
                  if any((folder / code.format(p.stem)).is_file() for code in _CODE))


def not_an_export(path: Path) -> str:
    """Why hobbit.load cannot use `path`, which holds no exported library, and what to do."""
    where = ("the folder that m.export(folder) or `hobbit compile --emit lib -o DIR` wrote; to compile and run a "
             f"model file, use hobbit.compile({os.fspath(path)!r})")
    if not path.exists():
        return f"{path} does not exist: hobbit.load takes {where}"
    if not path.is_dir():
        return f"{path} is a file, not an export folder: hobbit.load takes {where}"
    return (f"{path} holds no exported library (lib<name>.so, or a GPU model's <name>.ptx or <name>.hsaco, beside "
            f"<name>.json): hobbit.load takes {where}")


def export_given_as_model(folder: Path) -> str | None:
    """What to say when `folder` is given where a model goes and holds an export, else None."""
    names = exported_names(folder)
    if not names:
        return None
    what = f"lib{names[0]}.so" if (folder / f"lib{names[0]}.so").is_file() else f"a GPU model, {names[0]}.json"
    return (f"'{folder}' is a library hobbit exported ({what}), not a model: run it in Python with "
            f"hobbit.load({os.fspath(folder)!r}); hobbit.compile and the hobbit command take the model it was "
            f"compiled from")
