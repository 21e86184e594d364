"""`hobbit conformance`: the ONNX backend node tests on hobbit (hobbit.conformance), with
pass/FAIL per test as each finishes, or beside onnxruntime as the per-operator table of
CONFORMANCE.md; its exit status compares the failures with the expected-failure list."""

from __future__ import annotations

import argparse
import os
import re
import sys

from hobbit import conformance
from hobbit.cli.args import positive_seconds, regex, target_flag
from hobbit.cli.model import runnable_here
from hobbit.cli.output import writing
from hobbit.errors import ConfigError
from hobbit.target import host_target


def register(sub: argparse._SubParsersAction) -> None:
    """Add `hobbit conformance` to the subcommands."""
    p = sub.add_parser("conformance", help="run the ONNX backend node tests on hobbit (and onnxruntime)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run the node tests shipped with the onnx package. Alone, it prints pass/FAIL\n"
                                   "and the reason per test for hobbit as each finishes. With --markdown it also\n"
                                   "runs onnxruntime on the same tests and writes the per-operator table\n"
                                   "(CONFORMANCE.md). --write-expected-failures rewrites the expected-failure list\n"
                                   "of tests/test_onnx_backend.py from hobbit's results (entries for tests that a\n"
                                   "--filter left out are kept).\n\n"
                                   "Exit status: 1 when a test fails that is not on the expected-failure list;\n"
                                   "0 otherwise, also when listed tests now pass (they are named, to be removed\n"
                                   "from the list); 2 for a usage error or a filter that matches no test.",
                       epilog="examples:\n"
                              "  hobbit conformance                          every node test, hobbit only\n"
                              "  hobbit conformance --filter '^test_conv'    the Conv tests\n"
                              "  hobbit conformance --markdown CONFORMANCE.md --timeout 120\n"
                              "                                              hobbit and onnxruntime, per operator")
    p.add_argument("--filter", default="", metavar="REGEX", type=regex,
                   help="only tests whose name matches REGEX (Python re.search)")
    p.add_argument("--timeout", default=conformance.DEFAULT_TIMEOUT, type=positive_seconds, metavar="SECONDS",
                   help="time limit per test (default %(default)g); a test past it is recorded as failed "
                        "('timed out') and the run goes on")
    p.add_argument("--markdown", metavar="FILE", help="write the hobbit vs onnxruntime table (CONFORMANCE.md)")
    p.add_argument("--write-expected-failures", action="store_true",
                   help="rewrite tests/onnx_backend/expected_failures.txt from hobbit's failures")
    target_flag(p)
    p.set_defaults(func=cmd_conformance)


def cmd_conformance(args: argparse.Namespace) -> int:
    """Exit status 1 when a test fails that is not on the expected-failure list, else 0."""
    every = conformance.node_tests()
    cases = [c for c in every if re.search(args.filter, c.name)]
    if not cases:
        raise ConfigError(f"--filter {args.filter!r} matches none of the {len(every)} node tests "
                          f"(names look like {every[0].name}, {every[-1].name})")
    runnable_here(args.target, "conformance")
    target = args.target
    options = {"target": "host" if target == host_target() else f"{target.triple}:{target.cpu}:{target.features}"}
    if args.markdown:
        results, ort_results, seconds = conformance.measure(cases, progress=print, timeout=args.timeout,
                                                            options=options)
        with writing(args.markdown), open(args.markdown, "w") as f:
            f.write(conformance.markdown(cases, results, ort_results, seconds))
        s = conformance.summary(results, ort_results)
        print(f"{s['tests']} node tests: onnxruntime passed {s['onnxruntime']}, hobbit {s['hobbit']}; "
              f"hobbit passed {s['hobbit_of_onnxruntime']} of onnxruntime's ({100 * s['share']:.1f}%)")
    else:
        def show(name: str, outcome: conformance.Outcome) -> None:
            print(f"{'pass' if outcome.passed else 'FAIL'}  {name}  {outcome.reason}", flush=True)

        results = conformance.run_suite("hobbit", cases, show, timeout=args.timeout, options=options)
    listing = conformance.EXPECTED_FAILURES
    found = conformance.verdict(results, conformance.read_expected_failures(listing))
    print(found.format(os.path.relpath(listing) if listing.exists() else f"none found at {listing}"))
    if args.write_expected_failures:
        conformance.write_expected_failures(results, listing)
        print(f"wrote {listing}", file=sys.stderr)
        return 0
    return 1 if found.unexpected else 0
