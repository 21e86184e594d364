"""A run whose inputs imply more memory than the process can have (hobbit/runtime/allocation.py)
is an InputError at once, before anything is copied or allocated: a zero-stride view of one
row seen 2**28 times costs the caller nothing, but its contiguous copy and the outputs take
6 GiB each. It used to end in a raw MemoryError after seconds of copying.

The run happens in a child process whose address space is capped (RLIMIT_AS) a few GiB above
what it holds after compiling, so the test behaves the same on any machine and never
allocates much even when the check is missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent("""
    import resource, time
    import numpy as np
    from onnx import TensorProto, helper
    import hobbit

    def model(nodes):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        proto.ir_version = 8
        return hobbit.compile(proto)

    separable = model([helper.make_node("Relu", ["x"], ["y"], name="relu")])
    whole_batch = model([helper.make_node("Softmax", ["x"], ["t"], name="softmax", axis=0),
                         helper.make_node("Relu", ["t"], ["y"], name="relu")])
    row = np.ones((1, 6), np.float32)
    for m in (separable, whole_batch):
        m.run({"x": np.ones((4, 6), np.float32)})
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    cap = size + 8 * 2 ** 30  # the 6 GiB input fits; its copy and the 6 GiB outputs do not
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    for name, m in (("separable", separable), ("whole batch", whole_batch)):
        start = time.perf_counter()
        try:
            m.run({"x": np.broadcast_to(row, (2 ** 28, 6))})
            print(name, "ANSWERED", sep="|")
        except (hobbit.errors.HobbitError, MemoryError) as exc:
            print(name, type(exc).__name__, time.perf_counter() - start, exc, sep="|")
""")


def test_a_run_needing_more_than_the_process_can_have_is_an_input_error_at_once() -> None:
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    lines = [line.split("|") for line in child.stdout.splitlines() if "|" in line]
    assert [line[0] for line in lines] == ["separable", "whole batch"], child.stdout
    for name, kind, seconds, message in lines:
        assert kind == "InputError", (name, kind, message)
        assert float(seconds) < 5, (name, seconds)
        assert "(268435456, 6)" in message and "pass fewer samples per run" in message, message
