"""The code blocks of README.md and docs/*.md, as tests/test_docs.py runs them.

A fenced block's language says what it is: ```python and ```bash (or ```sh) are examples a
reader may paste, and are run as written; any other language (text, c, ...) is not code to
run. A fence with no language is refused, so a command cannot slip past the check unlabelled.
An example that cannot run in the test suite (it installs packages, needs a GPU) carries a
marker on the line right before its fence, with the reason:

    <!-- docs-test: skip: installs packages -->

Run as a script (`python tests/docs_blocks.py BLOCKS.json`, in the folder the examples are
to run in), it runs the blocks of one page in order, as a reader would: the Python blocks in
one namespace, so a later block sees what an earlier one made, and each shell block in bash
with -euo pipefail."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

RUN_LANGUAGES = {"python": "python", "bash": "bash", "sh": "bash"}
FENCE = re.compile(r"^(`{3,})(.*)$")
SKIP = re.compile(r"^<!-- docs-test: skip: (?P<reason>\S.*?) -->$")


@dataclass(frozen=True)
class Block:
    path: str  # the page, relative to the repository root
    line: int  # the line of the opening fence, from 1
    language: str  # "python" or "bash" for a block to run, else the fence's own word
    code: str
    skip: str  # the reason it is not run, "" for a block that runs

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES.values() and not self.skip

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


class DocsFormatError(Exception):
    """A page's blocks cannot be read unambiguously; the message names the page and line."""


def page_blocks(root: Path, page: Path) -> list[Block]:
    """Every fenced block of `page`, in order, with its skip marker's reason."""
    lines = page.read_text().splitlines()
    relative = page.relative_to(root).as_posix()
    blocks = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            if "docs-test" in lines[i] and not SKIP.match(lines[i]):
                raise DocsFormatError(f"{relative}:{i + 1}: a docs-test marker must read "
                                      f"'<!-- docs-test: skip: REASON -->'")
            i += 1
            continue
        fence, word = opening.group(1), opening.group(2).strip()
        if not word:
            raise DocsFormatError(f"{relative}:{i + 1}: a fenced block needs a language (python and bash "
                                  f"are run; text for output or diagrams)")
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), None)
        if end is None:
            raise DocsFormatError(f"{relative}:{i + 1}: the block is never closed")
        marker = SKIP.match(lines[i - 1]) if i > 0 else None
        blocks.append(Block(relative, i + 1, RUN_LANGUAGES.get(word, word), "\n".join(lines[i + 1:end]) + "\n",
                            marker.group("reason") if marker else ""))
        i = end + 1
    return blocks


def blocks_json(blocks: list[Block]) -> str:
    """The blocks as the script below reads them."""
    return json.dumps([asdict(b) for b in blocks])


def run_blocks(blocks: list[Block]) -> int:
    """Run the blocks of one page in order in the current folder; 0, or 1 at the first failure."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks:
        print(f"--- {block.where} ({block.language})", flush=True)
        if block.language == "python":
            try:
                exec(compile(block.code, block.where, "exec"), namespace)
            except BaseException:
                traceback.print_exc()
                print(f"FAILED: the Python block at {block.where}", flush=True)
                return 1
        else:
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code])
            if done.returncode:
                print(f"FAILED: the shell block at {block.where} exited {done.returncode}", flush=True)
                return 1
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(run_blocks([Block(**b) for b in json.loads(Path(sys.argv[1]).read_text())]))
