"""The GPU backend: SIMT and tensor-core kernels for NVPTX and AMDGPU, and their module.

args.py holds the GPU's kernel table (no parent: nothing falls back to the CPU) and what
an emitter receives (GpuArgs); table.py fills it; module.py builds one LLVM module of
kernels and the launch list that runs them; device_code.py finishes it (PTX and a cubin
through ptxas, or an AMDGPU code object). simt.py is the thread model the kernels are
written in (phases, barriers, shared memory) for a device or the host's grid emulation;
gemm.py and mma.py are the SIMT and tensor-core GEMMs that conv and matmul use."""
