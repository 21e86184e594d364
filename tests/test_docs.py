"""The README and the user guide (docs/) say what is true: their examples run as written, the
guide builds with MkDocs in strict mode (a broken link, a missing anchor or a page left out
of the navigation fails it), the README's links resolve, and the README's test command is
the one CI runs.

Every ```python and ```bash block of README.md and docs/*.md runs, page by page, in a fresh
folder that holds only a link to examples/ (the C example the AOT pages build), so each page
fetches its own model the way a reader would (`hobbit zoo`). The compile cache is on, as for
a user, in a folder of this test session. Blocks marked `<!-- docs-test: skip: REASON -->`
are counted, and must stay few (tests/docs_blocks.py says how blocks are read)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_blocks import Block, blocks_json, page_blocks

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNER = ROOT / "tests" / "docs_blocks.py"
README_MAX_LINES = 120
# Examples that cannot run here: the install and test commands (they change the machine, and
# the test command would run this suite again), and running a model on a GPU.
MAX_SKIPPED = 6
PAGE_TIMEOUT_S = 600


def _blocks() -> dict[str, list[Block]]:
    return {page.relative_to(ROOT).as_posix(): page_blocks(ROOT, page) for page in PAGES}


@pytest.fixture(scope="module")
def example_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment a reader has after `pip install`: this Python's `hobbit` and `python`
    first on PATH, and the compile cache on (the suite turns it off for other tests)."""
    env = dict(os.environ)
    env.pop("HOBBIT_CACHE", None)
    env["HOBBIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("docs-cache"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONFAULTHANDLER"] = "1"  # a crash in an example shows its Python stack in the failure
    return env


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p, blocks in _blocks().items() if any(b.runs for b in blocks)])
def test_examples_run_as_written(page: str, tmp_path: Path, example_env: dict[str, str]) -> None:
    blocks = [b for b in _blocks()[page] if b.runs]
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    listing = tmp_path / "blocks.json"
    listing.write_text(blocks_json(blocks))
    done = _run_page(listing, tmp_path, example_env)
    assert done.returncode == 0, f"an example of {page} fails:\n{(done.stdout + done.stderr)[-6000:]}"


def _run_page(listing: Path, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RUNNER), str(listing)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)


def test_examples_are_labelled_and_few_are_skipped() -> None:
    blocks = [b for page in _blocks().values() for b in page]
    skipped = [b for b in blocks if b.skip]
    assert all(b.language in ("python", "bash") for b in skipped), \
        [b.where for b in skipped if b.language not in ("python", "bash")]
    assert len(skipped) <= MAX_SKIPPED, [f"{b.where}: {b.skip}" for b in skipped]
    assert sum(b.runs for b in blocks) >= 3 * len(skipped)


def test_docs_build_strict(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_readme_is_short_and_its_links_resolve() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local, "the README links to the guide"
    assert [t for t in local if not (ROOT / t).exists()] == []


def _apt_packages(command: str) -> set[str]:
    words = shlex.split(command.split("apt-get install", 1)[1].split("&&")[0].split(">")[0])
    return {w for w in words if not w.startswith("-")}


def test_readme_test_command_is_what_ci_runs() -> None:
    """A machine set up from the README has every tool the suite needs (lld-22 was missing
    once, and the GPU tests failed there while CI passed)."""
    readme = next(b.code for b in _blocks()["README.md"] if "pytest" in b.code)
    ci = (ROOT / ".ci" / "run").read_text()
    ci_install = next(line for line in ci.splitlines() if "apt-get install" in line)
    assert _apt_packages(readme) == _apt_packages(ci_install)
    assert re.search(r'pip install -e "\.\[test\]"', readme) and re.search(r'pip install .*-e "\.\[test\]"', ci)
    pytest_line = re.search(r"python -m pytest[^&\n]*", readme).group(0).strip()
    assert pytest_line in ci.splitlines()
