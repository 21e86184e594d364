"""The names of the globals a CPU module defines for whoever runs it: the module's builders
(module.py, profile.py) define them, the JIT (hobbit.runtime.jit) looks them up. A module of
its own so that running a model imports none of the code generator."""

from __future__ import annotations

ENTRY = "hobbit_main"
# A constant C string in the module: JSON list of [arena offset, node name, op] per check record,
# so a JIT'd model and an exported library can both turn a status into a message.
STATUS_TABLE = "hobbit_status_table"
# The kernels' time counters of a module built to profile (hobbit.backend.cpu.profile).
PROFILE_GLOBAL = "hobbit_profile"
