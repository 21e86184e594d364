"""GPU plans: for each kernel of a GPU model, its launch and the choices its emitter reads.

launch.py holds the plan record (GpuPlan: grid, threads, per-thread work, the kernel's own
choices), the planner registry and the flat launch of element-wise kernels; gemm.py and
mma.py choose SIMT and tensor-core GEMM tiles and the mma operand Format (GemmPlan), conv.py and depthwise.py the convolutions,
pool.py and reduce.py the windows and segments of pooling, reductions and normalisation.
Like the rest of hobbit/plan: plain Python and numpy, no llvmlite."""
