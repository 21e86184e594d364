"""The CPU backend: a kernel per op for x86-64 and AArch64, and the module that calls them.

args.py holds the CPU's kernel table (empty until table.py imports the modules that
register in it) and what an emitter receives (KernelArgs); module.py builds one LLVM
module per model with its C-callable entry point; team.py is the walk by which a team of
threads runs the kernels in order, parallel.py the work sharing inside a kernel and the
thread runtime's interface, profile.py per-kernel timing. The GEMM driver (gemm.py)
serves conv, matmul and Winograd; the other modules are kernels, named after their ops."""
