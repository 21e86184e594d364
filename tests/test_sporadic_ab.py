"""scripts/sporadic_ab.py: both trees timed at every gap, back to back as the unit of the slowdown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import save_dense_relu

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "sporadic_ab.py"


def test_each_tree_has_a_row_per_gap_and_back_to_back_is_the_unit(tmp_path) -> None:
    path = save_dense_relu(tmp_path / "tiny.onnx", 64, 256, 256)
    done = subprocess.run([sys.executable, str(SCRIPT), str(ROOT), str(ROOT), "--model", str(path), "--threads", "2",
                           "--gaps", "1", "--runs", "3", "--rounds", "2"], capture_output=True, text=True, check=True)
    header, rule, *rows = done.stdout.strip().splitlines()
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert [(c[0], c[1]) for c in cells] == [("before", "0"), ("before", "1"), ("after", "0"), ("after", "1")]
    for tree, gap, median, p90, slowdown in cells:
        assert 0 < float(median) <= float(p90) * 1.0001
        assert float(slowdown) > 0
        if gap == "0":
            assert slowdown == "1.00"
