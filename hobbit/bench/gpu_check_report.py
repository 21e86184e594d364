"""scripts/gpu_check.sh's one report: every stage's outputs gathered into OUTDIR/gpu_check.json
and summarised in OUTDIR/gpu_check.md.

    python -m hobbit.bench.gpu_check_report OUTDIR

The GPU machine is lent for minutes at a time, so the script's results have to come back in
one piece that says what ran, what passed and what did not run at all: a stage that timed
out or crashed before writing its file is reported as such, never as zero failures. It reads
what the stages leave in OUTDIR: stages.tsv (the script's own record: stage, exit status,
seconds, time limit), gpu.txt (nvidia-smi and ptxas), tests.xml (pytest's JUnit XML),
sanitizer.json (hobbit.bench.gpu_sanitize), bench.json (hobbit.bench.gpu --json)."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import fields
from pathlib import Path
from typing import Any

from hobbit.bench.gpu import Row
from hobbit.bench.gpu_table import markdown

TIMED_OUT = (124, 137)  # timeout(1)'s status, and a KILL past its grace


def stages(outdir: Path) -> list[dict[str, Any]]:
    """stages.tsv's lines: name, rc, seconds, limit; with each stage's verdict."""
    out = []
    path = outdir / "stages.tsv"
    for line in path.read_text().splitlines() if path.is_file() else []:
        parts = line.split("\t")
        if len(parts) != 4 or not parts[1].lstrip("-").isdigit():
            continue
        rc = int(parts[1])
        status = "ok" if rc == 0 else "timed out" if rc in TIMED_OUT else f"failed (exit {rc})"
        out.append({"name": parts[0], "rc": rc, "seconds": float(parts[2]), "limit_s": float(parts[3]),
                    "status": status})
    return out


def tests(outdir: Path) -> dict[str, Any]:
    """pytest's counts from its JUnit XML, and each failure's test and first message line."""
    path = outdir / "tests.xml"
    if not path.is_file():
        return {"status": "missing: the test stage wrote no tests.xml"}
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as exc:
        return {"status": f"unreadable tests.xml: {exc}"}
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    failures = []
    for case in root.iter("testcase"):
        for kind in ("failure", "error"):
            bad = case.find(kind)
            if bad is not None:
                message = (bad.get("message") or bad.text or "").strip().splitlines()
                failures.append({"test": f"{case.get('classname')}::{case.get('name')}", "kind": kind,
                                 "message": message[0][:300] if message else ""})
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {"status": "ran", "total": counts["tests"], "passed": passed, "failed": counts["failures"],
            "errors": counts["errors"], "skipped": counts["skipped"], "failures": failures}


def _json(path: Path, missing: str) -> dict[str, Any]:
    if not path.is_file():
        return {"status": f"missing: {missing}"}
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        return {"status": f"unreadable {path.name}: {exc}"}


def gather(outdir: Path) -> dict[str, Any]:
    """Everything the stages left, as one JSON object; "ok" only if every stage ran and passed."""
    env = outdir / "gpu.txt"
    report = {
        "environment": env.read_text().splitlines() if env.is_file() else [],
        "stages": stages(outdir),
        "tests": tests(outdir),
        "sanitizer": _json(outdir / "sanitizer.json", "the sanitizer stage wrote no sanitizer.json"),
        "bench": _json(outdir / "bench.json", "the benchmark stage wrote no bench.json"),
    }
    t = report["tests"]
    tests_ok = t.get("status") == "ran" and t["failed"] == 0 and t["errors"] == 0
    ran = {s["name"] for s in report["stages"]}
    report["ok"] = (bool(ran) and all(s["rc"] == 0 for s in report["stages"])
                    and (tests_ok or "tests" not in ran))
    return report


def _sanitizer_md(s: dict[str, Any]) -> list[str]:
    if "results" not in s:
        return [f"Sanitizer: {s.get('status', 'no results')}."]
    if not s.get("available"):
        return [f"Sanitizer: not available ({s.get('reason', '')})."]
    tools = list(dict.fromkeys(r["tool"] for r in s["results"]))
    lines = [f"Sanitizer: {s.get('path')} ({s.get('version', '')}).", "",
             "| family | " + " | ".join(tools) + " |", "| --- |" + " --- |" * len(tools)]
    by = {(r["family"], r["tool"]): r for r in s["results"]}
    for family in dict.fromkeys(r["family"] for r in s["results"]):
        cells = []
        for tool in tools:
            r = by.get((family, tool))
            if r is None:
                cells.append("—")
                continue
            cell = r["status"] + (f" ({r['errors']} errors)" if r.get("errors") else "")
            if r["status"] not in ("clean",) and r.get("detail"):
                cell += ": " + r["detail"][0][:120]
            cells.append(cell.replace("|", "\\|"))
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return lines


def _bench_md(b: dict[str, Any]) -> list[str]:
    if "rows" not in b or not b["rows"]:
        return [f"Benchmark: {b.get('status', 'no rows')}."]
    names = {f.name for f in fields(Row)}
    rows = [Row(**{k: v for k, v in r.items() if k in names}) for r in b["rows"]]
    return [b.get("header", ""), "", markdown(rows)]


def render(report: dict[str, Any]) -> str:
    """The report as markdown: verdict, machine, stages, tests, sanitizer, benchmark."""
    lines = [f"# GPU check: {'all passed' if report['ok'] else 'NOT all passed'}", ""]
    lines += [f"    {line}" for line in report["environment"]] + [""]
    lines += ["| stage | status | seconds | limit s |", "| --- | --- | --- | --- |"]
    lines += [f"| {s['name']} | {s['status']} | {s['seconds']:.0f} | {s['limit_s']:.0f} |" for s in report["stages"]]
    t = report["tests"]
    lines += [""]
    if t.get("status") == "ran":
        lines.append(f"Device tests: {t['passed']} passed, {t['failed']} failed, {t['errors']} errors, "
                     f"{t['skipped']} skipped (of {t['total']}).")
        lines += [f"- {f['kind']}: `{f['test']}`: {f['message']}" for f in t["failures"]]
    else:
        lines.append(f"Device tests: {t.get('status')}.")
    return "\n".join(lines + [""] + _sanitizer_md(report["sanitizer"]) + [""] + _bench_md(report["bench"])) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m hobbit.bench.gpu_check_report OUTDIR", file=sys.stderr)
        return 2
    outdir = Path(args[0])
    report = gather(outdir)
    (outdir / "gpu_check.json").write_text(json.dumps(report, indent=1) + "\n")
    (outdir / "gpu_check.md").write_text(render(report))
    print(render(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
