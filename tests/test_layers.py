"""The package's import graph: no cycles, and each layer imports only the layers below it.

The layers are DESIGN.md's, bottom up: the ground floor (errors, the target); the graph
IR; the plans (hobbit/plan, frozen numpy-only decisions, which the op definitions read
for some tables: GEMM panels, winograd variants, RNN gates); the op definitions
(hobbit/ops: what an op is, the kernel it names by string, batch separability); the
frontends (one package per model format on what they share, hobbit.frontend.common, and
above them the one module that picks among the formats); the graph passes; the IR
vocabulary every backend shares (hobbit/emit); the backends (hobbit/backend: cpu, gpu,
and the LLVM finish they share); the runtime; and above them the interfaces. Every
`import` in every module counts, at module level or inside a function: an import inside a
function still makes the two modules depend on each other, it only hides it from Python's
start-up order.

KNOWN holds the edges that still break these rules, each with its reason. It may
only shrink: an entry whose import is gone, or that no longer runs up the layers
or closes a cycle, fails the test, so it is deleted with the fix."""

from __future__ import annotations

import ast
from pathlib import Path

import hobbit

PACKAGE = Path(hobbit.__file__).parent

# Lowest first; a module belongs to the first layer with a prefix of its name, and
# everything not listed is an interface: the API (hobbit/__init__.py), the compiler driver,
# hobbit/quantize, hobbit/zoo, the benchmarks (hobbit/bench), the command line (hobbit/cli).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("hobbit.errors", "hobbit.target", "hobbit.target_llvm", "hobbit.version"),  # ground
    ("hobbit.graph",),
    ("hobbit.plan",),
    ("hobbit.ops",),
    ("hobbit.frontend.common",),  # the Source interface and what every format shares
    ("hobbit.frontend.onnx", "hobbit.frontend.tf"),  # formats: neither imports the other
    ("hobbit.frontend.tflite",),  # read into TensorFlow's vocabulary, imported by tf's converters
    ("hobbit.frontend",),  # formats.py (the one module that knows every format), supported.py
    ("hobbit.passes",),
    ("hobbit.emit",),
    ("hobbit.backend",),
    ("hobbit.runtime",),
)

KNOWN: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported_names(tree: ast.AST, package: str) -> list[str]:
    """The dotted names every import statement in `tree` asks for; `from a import b` gives a.b
    (resolved to `a` later when b is not a module)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module that `name` lives in: the longest prefix of it that is a module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = {_owner(n, modules) for n in _imported_names(ast.parse(path.read_text()), package)
                   if n.split(".")[0] == "hobbit"}
        graph[name] = targets - {None, name}
    return graph


def layer(module: str) -> int:
    """The module's layer: its index in LAYERS, or one past the end for an interface."""
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return len(LAYERS)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in `graph` as a path that returns to its start, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for succ in sorted(graph.get(node, ())):
            if state.get(succ) == "open":
                return path[path.index(succ):] + [succ]
            if succ not in state:
                cycle = visit(succ)
                if cycle:
                    return cycle
        state[node] = "done"
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def _without_known(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in bs if (a, b) not in KNOWN} for a, bs in graph.items()}


def test_imports_inside_functions_and_relative_imports_count():
    source = "def f():\n    import hobbit.ops\nfrom .ir import Graph\nfrom .. import errors\n"
    names = _imported_names(ast.parse(source), "hobbit.graph")
    assert sorted(names) == ["hobbit.errors", "hobbit.graph.ir.Graph", "hobbit.ops"]


def test_find_cycle_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycles():
    cycle = find_cycle(_without_known(import_graph()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_layers_import_only_downward():
    upward = sorted((a, b) for a, bs in _without_known(import_graph()).items() for b in bs
                    if layer(b) > layer(a))
    assert upward == [], "imports running up the layers (DESIGN.md): " + \
        ", ".join(f"{a} -> {b}" for a, b in upward)


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo += graph.get(node, ())
    return False


def test_known_exceptions_are_still_needed():
    """Each entry still exists and still breaks a rule: it runs up the layers, or closes a
    cycle that no other entry already breaks."""
    graph = import_graph()
    rest = _without_known(graph)
    stale = sorted((a, b) for a, b in KNOWN
                   if b not in graph.get(a, ()) or (layer(b) <= layer(a) and not _reaches(rest, b, a)))
    assert stale == [], f"fixed, delete from KNOWN: {stale}"


def test_the_command_line_is_the_top_interface():
    """Only the console entry point imports the `hobbit` command (hobbit/cli); the benchmarks
    and every other interface are libraries that the command drives, never the other way."""
    importers = sorted(a for a, bs in import_graph().items() if not a.startswith("hobbit.cli")
                       and any(b == "hobbit.cli" or b.startswith("hobbit.cli.") for b in bs))
    assert importers == ["hobbit.console"]


def test_model_formats_import_no_other_format():
    """ONNX and TensorFlow share only hobbit.frontend.common (TFLite builds on tf/'s graph)."""
    allowed = {"hobbit.frontend.onnx": (), "hobbit.frontend.tf": (), "hobbit.frontend.tflite": ("hobbit.frontend.tf",)}
    crossing = []
    for a, bs in import_graph().items():
        own = next((p for p in allowed if a == p or a.startswith(p + ".")), None)
        for b in bs if own else ():
            other = next((p for p in allowed if b == p or b.startswith(p + ".")), None)
            if other not in (None, own, *allowed[own]):
                crossing.append(f"{a} -> {b}")
    assert crossing == [], "a format's frontend imports another's: " + ", ".join(sorted(crossing))


def test_the_runtime_reaches_frontends_only_through_common():
    """The compile cache, pickling, specialisation and NodeArgs see a model as a Source
    (hobbit.frontend.common.source), never as a format."""
    reached = sorted(f"{a} -> {b}" for a, bs in import_graph().items() if a.startswith("hobbit.runtime.")
                     for b in bs if b.startswith("hobbit.frontend.") and not b.startswith("hobbit.frontend.common."))
    assert reached == [], "the runtime imports a format's frontend: " + ", ".join(reached)


def test_ground_floor_imports_nothing_above_it():
    graph = import_graph()
    assert graph["hobbit.target"] <= {"hobbit.errors", "hobbit.target_llvm"}
    assert graph["hobbit.target_llvm"] == set()
    assert graph["hobbit.errors"] == set()
