"""Every TensorFlow op a TFLite translation can emit has a converter, so a builtin the
reader translates never ends as "unsupported" in the importer.

The op names are collected statically from the reader's source: the first argument of
each OpContext.node call (the op argument of Emitter.add), resolved through string
constants, conditional expressions, the module's name tables, local assignments and,
for a function parameter, the arguments at the function's call sites. An op name the
resolver cannot follow fails the test, so a new way of naming ops has to be taught here
rather than slipping past it. Placeholders for untranslated builtins ("TFLite:...") are
meant to be unsupported and are left out."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

from hobbit.frontend.tf import convert  # noqa: F401  (fills the converter table)
from hobbit.frontend.tf.converters import supported_ops
from hobbit.frontend.tflite import emit, ops, reader

PLACEHOLDER = "TFLite:"


class _Unresolved(Exception):
    pass


class _OpNames:
    """The op names one module's node-making calls can pass."""

    def __init__(self, module: ModuleType):
        self.module = module
        self.tree = ast.parse(inspect.getsource(module))
        self.functions = {f.name: f for f in ast.walk(self.tree) if isinstance(f, ast.FunctionDef)}
        self.parents = {child: parent for parent in ast.walk(self.tree) for child in ast.iter_child_nodes(parent)}

    def collect(self) -> set[str]:
        names: set[str] = set()
        for call in ast.walk(self.tree):
            op = _op_argument(call)
            if op is not None:
                names |= self.resolve(op, self._enclosing(call))
        return names

    def _enclosing(self, node: ast.AST) -> ast.FunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef):
                return node
        return None

    def resolve(self, expr: ast.expr, function: ast.FunctionDef | None) -> set[str]:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {PLACEHOLDER if expr.value.startswith(PLACEHOLDER) else expr.value}
        if isinstance(expr, ast.JoinedStr):
            head = expr.values[0] if expr.values else None
            if isinstance(head, ast.Constant) and str(head.value).startswith(PLACEHOLDER):
                return {PLACEHOLDER}
        if isinstance(expr, ast.IfExp):
            return self.resolve(expr.body, function) | self.resolve(expr.orelse, function)
        if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name):
            table = getattr(self.module, expr.value.id, None)
            if isinstance(table, dict) and all(isinstance(v, str) for v in table.values()):
                return set(table.values())
        if isinstance(expr, ast.Name) and function is not None:
            return self._resolve_name(expr.id, function)
        raise _Unresolved(f"{self.module.__name__} line {expr.lineno}: cannot tell which op {ast.unparse(expr)} names")

    def _resolve_name(self, name: str, function: ast.FunctionDef) -> set[str]:
        parameters = [a.arg for a in function.args.args]
        if name in parameters:
            return self._call_site_arguments(function, parameters.index(name))
        names: set[str] = set()
        for statement in ast.walk(function):
            if not isinstance(statement, ast.Assign):
                continue
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    names |= self.resolve(statement.value, function)
                elif isinstance(target, ast.Tuple) and isinstance(statement.value, ast.Tuple):
                    for element, value in zip(target.elts, statement.value.elts):
                        if isinstance(element, ast.Name) and element.id == name:
                            names |= self.resolve(value, function)
        if not names:
            raise _Unresolved(f"{self.module.__name__}.{function.name}: no assignment names the op in {name}")
        return names

    def _call_site_arguments(self, function: ast.FunctionDef, position: int) -> set[str]:
        names: set[str] = set()
        for call in ast.walk(self.tree):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function.name:
                names |= self.resolve(call.args[position], self._enclosing(call))
        return names


def _op_argument(call: ast.AST) -> ast.expr | None:
    """The op of c.node(op, ...) or emitter.add(name, op, ...)."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    if call.func.attr == "node" and call.args:
        return call.args[0]
    if call.func.attr == "add" and len(call.args) >= 2:
        return call.args[1]
    return None


@pytest.fixture(scope="module")
def emitted_ops() -> set[str]:
    names: set[str] = set()
    families = [importlib.import_module(info.name) for info in pkgutil.iter_modules(ops.__path__, ops.__name__ + ".")]
    for module in (*families, emit, reader):
        names |= _OpNames(module).collect()
    return names - {PLACEHOLDER}


def test_the_collection_finds_ops_of_every_kind_of_naming(emitted_ops):
    """Constants (Conv2D), tables (Sigmoid, Any), conditionals (Select), tuple assignments
    (ResizeNearestNeighbor), Emitter.add (Const, Placeholder)."""
    assert {"Conv2D", "Sigmoid", "Any", "Atan2", "SelectV2", "Select", "ResizeNearestNeighbor", "Const",
            "Placeholder", "All", "Cumsum", "DepthToSpace", "SpaceToDepth", "GatherNd", "ReverseV2", "LRN"} <= emitted_ops
    assert not [op for op in emitted_ops if op.startswith(PLACEHOLDER)]


def test_every_emitted_op_has_a_converter(emitted_ops):
    missing = sorted(emitted_ops - set(supported_ops()))
    assert not missing, f"TFLite translations emit ops without a TensorFlow converter: {missing}"
