"""hobbit.runtime.trust: a path is private when this user (or root) owns it and neither its
group nor others can write it; every other case is a problem naming the path and the fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hobbit.runtime import trust

NOBODY = 65534


def give_away(path: Path) -> None:
    """chown to another user; only a non-root run that cannot chown skips (CI runs as root)."""
    try:
        os.chown(path, NOBODY, NOBODY)
    except PermissionError:
        if os.geteuid() == 0:
            raise
        pytest.skip("chown to another user needs root")


def test_a_folder_of_mine_with_mode_0700_is_private(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o700)
    assert trust.check_private(folder, "cache folder") is None
    (folder / "code.o").write_bytes(b"x")
    os.chmod(folder / "code.o", 0o644)
    assert trust.check_private_tree(folder, "artifact folder") is None


def test_root_owned_system_folders_are_trusted() -> None:
    """As ssh does: root can run code as anyone, so a root-owned install is no extra risk."""
    assert os.stat("/usr").st_uid == 0
    assert trust.check_private("/usr", "artifact folder") is None


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777, 0o1777])
def test_a_folder_writable_by_group_or_others_is_a_problem(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, mode)
    problem = trust.check_private(folder, "cache folder")
    assert problem is not None
    assert f"cache folder {folder} is writable by group or others (mode {mode:04o})" in problem
    assert f"chmod 700 {folder}" in problem


def test_a_writable_file_names_chmod_go_w(tmp_path: Path) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(b"x")
    os.chmod(path, 0o666)
    problem = trust.check_private(path, "artifact library")
    assert problem is not None and f"chmod go-w {path}" in problem


def test_a_folder_owned_by_another_user_is_a_problem(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    give_away(folder)
    problem = trust.check_private(folder, "artifact folder")
    assert problem is not None
    assert f"artifact folder {folder} is owned by uid {NOBODY}, not by you (uid {os.geteuid()})" in problem
    assert f"chown {os.geteuid()} {folder}" in problem


def test_a_missing_path_is_a_problem_not_safe(tmp_path: Path) -> None:
    problem = trust.check_private(tmp_path / "absent", "artifact folder")
    assert problem is not None and "cannot be checked" in problem


def test_check_stat_judges_the_open_file(tmp_path: Path) -> None:
    path = tmp_path / "w.bin"
    path.write_bytes(b"x")
    os.chmod(path, 0o620)
    with open(path, "rb") as f:
        problem = trust.check_stat(os.fstat(f.fileno()), path, "weights file")
    assert problem is not None and "mode 0620" in problem


def test_a_tree_reports_the_first_bad_file_inside(tmp_path: Path) -> None:
    folder = tmp_path / "artifact"
    (folder / "sub").mkdir(parents=True, mode=0o700)
    os.chmod(folder, 0o700)
    bad = folder / "sub" / "model.weights"
    bad.write_bytes(b"x")
    os.chmod(bad, 0o646)
    problem = trust.check_private_tree(folder, "artifact folder")
    assert problem is not None and str(bad) in problem and "mode 0646" in problem


def test_a_tree_reports_a_file_owned_by_another_user(tmp_path: Path) -> None:
    folder = tmp_path / "artifact"
    folder.mkdir(mode=0o700)
    lib = folder / "libm.so"
    lib.write_bytes(b"x")
    os.chmod(lib, 0o644)
    give_away(lib)
    problem = trust.check_private_tree(folder, "artifact folder")
    assert problem is not None and str(lib) in problem and f"uid {NOBODY}" in problem
