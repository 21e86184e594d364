"""Whether a file or folder is private to this user, before native code is mapped from it.

The compile cache and hobbit.load map machine code into the process, so a folder another
user can write is a way for them to run code as you. The rule is ssh's for its keys: the
path must be owned by you (or by root, who can run code as you anyway: a system-wide
install under /usr is trusted) and writable by neither its group nor others. Read bits
are not checked: reading a model leaks it but runs nothing.

Only the path itself is checked, not its parent folders: someone who can write a parent
can move the folder away and put their own in its place, but theirs is then owned by them
and fails the check. Symbolic links are followed, so what is checked is what is read."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

_ROOT_UID = 0


def check_private(path: str | os.PathLike, what: str) -> str | None:
    """The problem that makes `path` unsafe to load native code from, or None when it is safe.

    Contract: `what` names the thing for the message ("compile cache folder", "artifact
    library"). The returned text is one sentence naming `what`, the path, the problem
    (missing, owned by uid N, writable by group/others with its mode) and the fix (chmod
    go-w / chown), ready for a warning or an error message; the caller decides which (the
    compile cache warns and compiles without it, hobbit.load should raise). A path that
    cannot be stat'ed (missing, no permission) is reported as a problem, never as safe."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{what} {os.fspath(path)} cannot be checked: {exc.strerror or exc}"
    return check_stat(st, path, what)


def check_stat(st: os.stat_result, path: str | os.PathLike, what: str) -> str | None:
    """check_private for a stat result already taken, e.g. os.fstat of a file just opened, so
    the file checked is the file read even if the path is replaced in between."""
    me = os.geteuid()
    where = f"{what} {os.fspath(path)}"
    if st.st_uid not in (me, _ROOT_UID):
        return (f"{where} is owned by uid {st.st_uid}, not by you (uid {me}): another user could put "
                f"code there; fix with chown {me} {shlex.quote(os.fspath(path))} or remove it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(st.st_mode)
        fix = "chmod 700" if stat.S_ISDIR(st.st_mode) else "chmod go-w"
        return (f"{where} is writable by group or others (mode {mode:04o}): another user could put code "
                f"there; fix with {fix} {shlex.quote(os.fspath(path))}")
    return None


def check_private_tree(root: str | os.PathLike, what: str) -> str | None:
    """check_private for a folder and everything under it (the first problem found, or None):
    for an artifact folder, whose library and weights file must all be private."""
    problem = check_private(root, what)
    if problem is not None:
        return problem
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs + files):
            problem = check_private(Path(folder) / name, f"a file in {what}")
            if problem is not None:
                return problem
    return None

