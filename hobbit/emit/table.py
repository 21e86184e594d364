"""The kernel table class: which code implements each kernel an op definition names.

An op definition (hobbit/ops) says what an op means and names its kernel (OpDef.kernel);
it knows nothing about LLVM. A backend's table (`CPU` in hobbit/backend/cpu/args.py,
`GPU` in hobbit/backend/gpu/args.py) maps kernel names to the functions that emit them:
`lower(args)` writes a kernel body, and an element-wise kernel also has
`scalar(emit, args, attrs)`, the expression the loop emitter and fused epilogues run
(hobbit/emit/scalar_ops.py). Each backend module registers the kernels it implements in
its own file (register(name, lower), or @table.kernel(name) above the lowering), so a new op is one registration per layer that knows a fact about it. A
table may have a parent: a backend that differs from another in a few kernels overrides
those and inherits the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from hobbit.errors import CodegenError

Lower = TypeVar("Lower", bound=Callable[..., None])


@dataclass(frozen=True)
class Kernel:
    lower: Callable[..., None]
    # Scalar expression of an element-wise kernel: scalar(emitter, args, attrs) -> value.
    scalar: Callable[..., Any] | None = None
    # Whether the emitter computes inside the run-time extents of a node's values
    # (hobbit.graph.extents): dynamic(node) -> None if it does for this node, else why not.
    # A kernel without one is compiled only for static shapes.
    dynamic: Callable[[Any], str | None] | None = None


class KernelTable:
    def __init__(self, backend: str, parent: KernelTable | None = None):
        self.backend = backend
        self.parent = parent
        self._kernels: dict[str, Kernel] = {}

    def register(self, name: str, lower: Callable[..., None], scalar: Callable[..., Any] | None = None,
                 dynamic: Callable[[Any], str | None] | None = None) -> None:
        if name in self._kernels:
            raise ValueError(f"kernel {name!r} registered twice for backend {self.backend}")
        self._kernels[name] = Kernel(lower, scalar, dynamic)

    def kernel(self, name: str, scalar: Callable[..., Any] | None = None,
               dynamic: Callable[[Any], str | None] | None = None) -> Callable[[Lower], Lower]:
        """register as a decorator: @CPU.kernel("Tile") above the function that lowers it."""
        def add(lower: Lower) -> Lower:
            self.register(name, lower, scalar, dynamic)
            return lower
        return add

    def lookup(self, name: str) -> Kernel:
        """The kernel `name` of this backend, else of its nearest ancestor that has one."""
        table: KernelTable | None = self
        while table is not None:
            if name in table._kernels:
                return table._kernels[name]
            table = table.parent
        raise CodegenError(f"backend {self.backend} has no kernel {name!r}")

    def scalars(self) -> dict[str, Callable[..., Any]]:
        """The scalar expression of every element-wise kernel this table or an ancestor has."""
        own = {name: k.scalar for name, k in self._kernels.items() if k.scalar is not None}
        return {**self.parent.scalars(), **own} if self.parent is not None else own

    def names(self) -> set[str]:
        """Every kernel name this table or an ancestor implements."""
        own = set(self._kernels)
        return own | self.parent.names() if self.parent is not None else own

