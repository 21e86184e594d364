"""The IR vocabulary every backend shares (DESIGN.md, layer 6).

The kernel builder (builder: counted loops, typed pointers, masked vectors), 16-bit
float conversions (half), the scalar expressions of element-wise ops written once
for every backend and vector width (scalar, trig, scalar_ops), fused epilogues and
broadcasting loads (epilogue), reducers (reduce), run-time check records (status),
kernel naming (naming), the kernel table class (table) and what every kernel's
emitter receives (args). The backends (hobbit/backend/cpu, hobbit/backend/gpu) write
their kernels in it; nothing here knows a device's loop structure or thread model."""
