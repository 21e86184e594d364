"""The `hobbit` console script and `python -m hobbit`. The command's modules (numpy, onnx,
LLVM) take seconds to import, and a Ctrl-C in those seconds must end the process as one
during the command does (hobbit.cli.main.main): one line, status 130, no traceback. So this
module imports nothing heavy itself and imports the command inside the handler."""

from __future__ import annotations

from hobbit.interrupt import interrupted


def main() -> int:
    """Entry point of the `hobbit` command; returns the process exit status."""
    try:
        from hobbit.cli.main import main as command
    except KeyboardInterrupt:
        return interrupted()
    return command()
