"""The committed IR fingerprints (scripts/ir_fingerprints.json) list every case the script
makes, and hold for a few cheap ones.

scripts/ir_fingerprints.py hashes the LLVM IR hobbit generates before optimisation, and the
packed weights, for each zoo model, precision and target (minutes for all of them): a code
move that changes none of them changed nothing users get. This test recomputes a subset
that runs in seconds (float32 and bf16 on a CPU, a quantized model in int8, one GPU target)
so that the file keeps up with the code. A change that alters the generated code on purpose
rewrites the file in the same commit: `python scripts/ir_fingerprints.py --write
scripts/ir_fingerprints.json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ir_fingerprints.py"
FILE = ROOT / "scripts" / "ir_fingerprints.json"
CHECKED = ["squeezenet1_1/fp32/znver4", "squeezenet1_1/bf16/znver4", "squeezenet1_1/fp32/sm_90",
           "resnet18/fp32/znver4", "yolo_nms/fp32/znver4", "yolo_nms/int8/znver4"]
REWRITE = ("if the generated code changes on purpose: "
           "python scripts/ir_fingerprints.py --write scripts/ir_fingerprints.json")


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_the_file_lists_every_case_the_script_makes():
    listed = _script("--list")
    assert listed.returncode == 0, listed.stderr
    cases = listed.stdout.split()
    expected = {key for case in cases for key in (case, f"{case}:weights")}
    assert set(json.loads(FILE.read_text())) == expected, REWRITE
    assert set(CHECKED) <= set(cases)


def test_a_few_cases_match_the_committed_fingerprints():
    done = _script("--check", str(FILE), "--quiet", "--only", *CHECKED)
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{REWRITE}"
    assert f"all {2 * len(CHECKED)} fingerprints match" in done.stdout
