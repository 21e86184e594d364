"""Files hobbit.load uses as the very files it checked: opened once, checked through the
descriptor, and used through that descriptor.

hobbit.load used to hash the library by path and then dlopen it by path again: someone who
can write a parent folder could swap the file between the two and have their code run.
Here each file is opened once; the descriptor's owner and mode are checked
(hobbit.runtime.trust.check_stat) and the library's bytes hashed through it; then the
loader is handed /proc/self/fd/N, which names the open file itself, never a path looked up
again. The weights file is passed to the library's <name>_create the same way.

Why /proc/self/fd/N of the checked file rather than a copy into a memfd: the copy would
hold the whole library (weights up to 16 MiB are inside it, hobbit.runtime.export) in
unswappable memory for the life of the process, beside the page cache's copy; mapping the
checked file itself shares its pages. What is left is the file's own bytes changing in place
after the hash, which needs write permission on the file itself: check_stat accepts only a
file that this user (or root) owns and nobody else may write.

Why the library's descriptor stays open for the life of the process: the library is never
unloaded (it is linked -z nodelete), and glibc's dlopen hands back an already-loaded library
whose name equals the name asked for, so once the descriptor was closed, another library
opened under the reused number would be answered with the first. One descriptor is kept per
file (device and inode): loading the same file again asks for the same name, and glibc
hands back the same library. Linux only, as hobbit's exported libraries are."""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import stat
import threading
from pathlib import Path

from hobbit.errors import ArtifactError
from hobbit.runtime.trust import check_stat

_PROC_FD = "/proc/self/fd"
_KEPT: dict[tuple[int, int], int] = {}  # (device, inode) of a loaded library -> its open descriptor
_LOCK = threading.Lock()


def open_private(path: Path, what: str) -> int:
    """A read-only descriptor of `path`, a regular file private to this user (else an
    ArtifactError naming `what` and the path). The caller closes it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ArtifactError(f"cannot read the {what} {path}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"the {what} {path} is not a regular file")
        problem = check_stat(st, path, what)
        if problem is not None:
            raise ArtifactError(f"hobbit.load refuses to load native code: {problem}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_private(path: Path, what: str) -> bytes:
    """The bytes of a file private to this user (open_private's checks, then one read)."""
    fd = open_private(path, what)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def descriptor_path(fd: int) -> str:
    """The name that opens the file behind `fd` itself, whatever is at its path now."""
    if not os.path.isdir(_PROC_FD):
        raise ArtifactError(f"hobbit.load needs {_PROC_FD} (Linux) to load exactly the files it checked")
    return f"{_PROC_FD}/{fd}"


def load_library(path: Path, sha256: str) -> ctypes.CDLL:
    """The library at `path`, loaded from the descriptor whose bytes have this sha256."""
    fd = open_private(path, "artifact library")
    try:
        if _sha256(fd) != sha256:
            raise ArtifactError(f"{path} is not the library that was exported (its sha256 differs from the "
                                f"manifest's): damaged or replaced; export it again")
        st = os.fstat(fd)
        with _LOCK:
            kept = _KEPT.get((st.st_dev, st.st_ino))
            if kept is None:
                library = _dlopen(descriptor_path(fd), path)
                _KEPT[(st.st_dev, st.st_ino)], fd = fd, -1  # kept open: see the module docstring
                return library
            return _dlopen(descriptor_path(kept), path)
    finally:
        if fd >= 0:
            os.close(fd)


def _dlopen(name: str, path: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(name, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as exc:
        raise ArtifactError(f"the library {path} cannot be loaded: {exc}") from exc


def _sha256(fd: int) -> str:
    h = hashlib.sha256()
    if os.fstat(fd).st_size:
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            h.update(data)
    return h.hexdigest()
