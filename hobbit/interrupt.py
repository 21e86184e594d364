"""What a Ctrl-C does to the `hobbit` command, in one place: the console script (during the
imports) and the command itself (during the work) both end with one line and status 130."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a process killed by Ctrl-C


def interrupted() -> int:
    """Say so on stderr; the exit status for a Ctrl-C."""
    print("hobbit: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED
