"""Which of a target's CPU and feature names LLVM does not recognise for its triple.

Why ask LLVM and not keep a list: the names are LLVM's (its subtarget tables), and they
change between LLVM versions; the LLVM that compiles is the one that must know them. An
unknown name is not an error to LLVM: it prints "'+x' is not a recognized feature for this
target (ignoring feature)" on stderr and builds code without it, so a typo such as
"+avx512bf61" silently gave code without BF16 (and, the name not being a host feature, an
export-only model). LLVM has no API that lists the names (its `-mattr=help` table prints
once per process, for the first architecture asked), so the check builds a TargetMachine
with the names and reads the warnings LLVM writes to file descriptor 2 while it does,
under a lock so that two checks in one process do not read each other's lines. Output
other threads write to stderr during those microseconds is lost; the result is cached per
(triple, CPU, features), so a process pays this once per target."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from functools import lru_cache

_WARNING = re.compile(r"'([^'\n]*)' is not a recognized (feature|processor) for this target")
_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def unrecognized(triple: str, cpu: str, features: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(CPU names, feature entries such as '+nonsense') that LLVM ignores for `triple`."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple(triple)
    text = _stderr_of(lambda: machine.create_target_machine(cpu=cpu, features=features))
    found: dict[str, list[str]] = {"processor": [], "feature": []}
    for name, kind in _WARNING.findall(text):
        if name not in found[kind]:
            found[kind].append(name)
    return tuple(found["processor"]), tuple(found["feature"])


def _stderr_of(action) -> str:
    """What `action` writes to file descriptor 2 (where LLVM's errs() goes), kept from the terminal."""
    with _LOCK, tempfile.TemporaryFile() as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            action()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode(errors="replace")
