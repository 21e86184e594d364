"""scripts/cold_compile.py: a fresh process per compile, the phases of compile()'s report, and a
total that holds them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import save_dense_relu

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "cold_compile.py"


def test_the_table_has_every_phase_within_the_total(tmp_path) -> None:
    path = save_dense_relu(tmp_path / "tiny.onnx", 4, 16, 8)
    done = subprocess.run([sys.executable, str(SCRIPT), str(path), "--threads", "1", "--rounds", "2"],
                          capture_output=True, text=True, check=True)
    header, rule, row = done.stdout.strip().splitlines()
    assert [c.strip() for c in header.strip("|").split("|")][2:7] == ["import s", "passes s", "codegen s", "llvm s",
                                                                     "jit s"]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "tiny.onnx"
    fastest, slowest = map(float, cells[1].split("–"))
    phases = [float(c) for c in cells[2:7]]
    assert 0 < fastest <= slowest and all(p >= 0 for p in phases)
    assert sum(phases) <= slowest
