"""Backends (DESIGN.md, layer 7): one folder per device, each with its kernels, its kernel
table and its module builder.

cpu/ writes x86-64 and AArch64 kernels for a team of threads (hobbit.runtime.pool);
gpu/ writes SIMT and tensor-core kernels for NVPTX and AMDGPU. Both are written in the
shared vocabulary of hobbit/emit. What neither owns sits here: LLVM's pass pipeline and
code emission for any target (llvm.py) and the target machine (machine.py)."""
