"""Suite-wide settings: the compile cache lives in a per-session temporary folder, never
the user's home, and is off unless a test asks for it (compile(cache=True)). Many tests
read CompiledModel.report.graph, which a model loaded from the cache does not carry, so
whether two tests compile the same model must not change what they see."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _compile_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory):
    saved = {name: os.environ.get(name) for name in ("HOBBIT_CACHE_DIR", "HOBBIT_CACHE")}
    os.environ["HOBBIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("hobbit-cache"))
    os.environ["HOBBIT_CACHE"] = "0"
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
