"""Suite-wide settings: the compile cache lives in a per-session temporary folder, never
the user's home, and is off unless a test asks for it (compile(cache=True)). Many tests
read CompiledModel.report.graph, which a model loaded from the cache does not carry, so
whether two tests compile the same model must not change what they see.

Once collection has imported every test module (TensorFlow, Keras and onnx's backend
suite among them: some 330k objects), they are moved out of the cyclic collector's sight
(gc.freeze). hobbit.compile runs gc.collect() after each stage (hobbit.runtime.memory), and
each full collection walked them all: 0.2 s each, 0.8 s of a compile that takes 0.04 s
without them (a one-node model, measured), which was most of the suite's time. What is
frozen lives for the whole session anyway; what the tests create is collected as before."""

from __future__ import annotations

import gc
import os

import pytest

# TensorFlow's own (non-oneDNN) CPU kernels lack dilated DepthwiseConv2dNative, and TensorFlow
# turns oneDNN on by default only on some CPUs (not on an AVX2-only Zen 1): the TFLite reader's
# oracle (tests/frontend/tflite/oracle.py) runs that op. Set before any test imports TensorFlow.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


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


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()
